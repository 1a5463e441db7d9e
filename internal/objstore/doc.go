// Package objstore keeps large data on an S3-compatible object store:
// AWS S3, MinIO, Cloudflare R2, Google Cloud Storage's XML (S3) API, or
// the server the local stack starts (internal/devstack).
//
// It is a thin layer over the AWS SDK's S3 client (aws-sdk-go-v2), which
// every one of those stores speaks: Put (streamed, with its size and
// content type, its MD5 sent so the store checks what it received), Get
// (streamed, checking the size and the SHA-256 of what it read as it
// ends, so a download cut short or garbled is an error to the reader,
// never a short file), Stat, List and Delete (a missing object is no
// error). Keys are named by callers; Key gives the content-addressed key
// of bytes by their SHA-256, under which a retry or a second writer of
// the same bytes writes what is there already. It links no database:
// the store's blobs (internal/store) use it, and so can a payload codec.
//
// The SDK's client, rather than minio-go, because it was in the module
// graph already (the task runner's), it is the client AWS maintains for
// the API the others copy, and its default credential chain gives a
// worker on AWS its pod's or instance's role with no key to manage.
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
