// Package objstore keeps large data on an S3-compatible object store:
// AWS S3, MinIO, Cloudflare R2, Google Cloud Storage's XML (S3) API, or
// the server the local stack starts (internal/devstack).
//
// It is a thin layer over the AWS SDK's S3 client (aws-sdk-go-v2), which
// every one of those stores speaks, with four operations: Put (streamed,
// with its size and content type, its MD5 sent so the store checks what
// it received), Get (streamed, checking the size and the SHA-256 of what
// it read at the end, so a download cut short or garbled is an error to
// the reader, never a short file), Stat and Delete (a missing object is
// no error). Keys are named by callers; Key gives the content-addressed
// key of bytes by their SHA-256, under which a retry or a second writer
// of the same bytes writes what is there already.
//
// The SDK retries nothing: callers' retries (Temporal's, for activities)
// own them, as with model providers. Failures to reach the store are
// agent.CodeUnavailable (retryable), never agent.CodeNotFound, so a store
// that is down never looks like data that is gone.
//
// Configuration comes from the environment (ConfigFromEnv); with no
// bucket set there is no object store and large data stays in
// PostgreSQL. The secret key is never logged (Config.String omits it).
package objstore
