// Package payloadstore keeps Temporal payloads over a size in the object
// store (internal/objstore), so that a long conversation, a large request
// or a large model reply never meets Temporal's limits: 2 MiB a payload
// and 4 MiB a gRPC message by default, 50 MiB a history.
//
// It imports only internal/objstore: it must not import the workflows or
// the store, so that any Temporal client can use it.
//
// It is a storage driver for the Temporal SDK's external storage
// (converter.ExternalStorage, the claim-check pattern every Temporal SDK
// shares) rather than a converter.PayloadCodec in the data converter,
// because the SDK resolves a reference before a workflow task or an
// activity task runs: a store that is down fails the workflow task (the
// server retries it, and the workflow code never sees a payload it
// could not read) or the activity attempt (retried by its retry policy),
// where a codec in the data converter would hand workflow code a decoding
// error at a future's Get, which a workflow may take for the activity's
// own failure.
//
// The payload, metadata and data, serialized as a protobuf message
// (deterministically), is the object, under objstore.Key of its SHA-256:
// a retried activity, a replayed workflow task or a second client writes
// the same object again, and a reader checks that the bytes it read are
// those the reference names (objstore.Get checks size and SHA-256). In
// the history, the payload is the SDK's reference (encoding json/protobuf,
// temporal.api.sdk.v1.ExternalStorageReference), which the temporal CLI
// and the Web UI show as JSON:
//
//	{"driverName":"agentflow-s3","claimData":{"encoding":"json/plain",
//	 "key":"payloads/sha256/<hex>","sha256":"<hex>","size":"3407919",
//	 "uri":"s3://agentflow/payloads/sha256/<hex>"}}
//
// A payload that is no reference passes through untouched, so histories
// recorded without a store, and payloads from the temporal CLI and other
// SDKs, read as before. Resolve reads a reference outside the SDK's own
// paths (a history event read with GetWorkflowHistory).
package payloadstore
