// Package store keeps agentflow's durable state in Postgres through pgx: the
// per-tenant catalog (tools, agents and their immutable versions, routing
// rules, a catalog version), turns and their steps, session transcripts,
// turn results, approval decisions and content-addressed blobs.
//
// It must not import the workflows, the activities, the gateway or the
// tools: they call it, and it knows the domain (internal/agent) only.
//
// Applying a catalog that changes a tenant advances its catalog version and,
// at commit, sends a NOTIFY on CatalogChannel naming the tenant, so that
// caches elsewhere drop what they hold; Listen is the reconnecting LISTEN
// loop they use.
//
// Open connects and applies the embedded migrations (migrations/*.sql, run
// by tern under an advisory lock, so workers starting together do not race).
//
// Every write is idempotent because Temporal retries the activities that
// call it: catalog writes compare spec hashes, turn and result writes are
// keyed by (tenant, job), steps by their sequence number and session appends
// by the job that appended them. A retried call therefore writes nothing new
// and, where it returns data, returns what the first call stored.
//
// Reads are scoped by tenant: a key or ref that belongs to another tenant is
// reported as not found, never as forbidden, so that ids do not leak.
//
// # Blobs
//
// Blobs are content-addressed ("cas://sha256:<hex>"): stored once by their
// sha256 and read by the tenants that stored them (blob_owners). A blob
// of at most one chunk (Options.BlobChunkSize, 1 MiB by default) is one
// row of cas_blobs, as every blob was before larger ones were streamed;
// a larger one is rows of blob_chunks, one per chunk, so that files of
// any size — a tool's download, an upload — move through a worker or the
// gateway a chunk at a time. WriteTenantBlob writes from an io.Reader,
// computing the sha256 as the bytes go by, with COPY, in one transaction
// that adds the blob's row last: a write that fails midway leaves no
// chunk behind and no blob to read, and a write of bytes already stored
// is rolled back and answers the stored blob's ref. OpenTenantBlob
// returns a BlobReader (io.ReadSeekCloser) that fetches a chunk per
// query. Blobs stored in one row, before or since, are read as before,
// whole with their row.
//
// With an object store (Options.Objects, internal/objstore), a blob
// larger than its threshold is kept there instead, under the key of its
// sha256, and its row in cas_blobs names the object (object_key) where it
// would hold bytes or chunks: the object is written first, the row and
// its owner last, in one transaction, so nothing half-written is ever
// referenced (objects.go). Readers do not change: BlobReader streams the
// object and checks its size and hash as it ends.
//
// Chunk rows rather than PostgreSQL large objects, because: a large
// object can only be read inside a transaction, which a download would
// hold open, with its connection, for as long as its client takes to
// read, where each chunk here is one short query and a slow reader
// holds no connection between them; chunks are ordinary rows, removed
// with their blob (ON DELETE CASCADE) where large objects need
// lo_unlink or vacuumlo, and carried by logical replication, which skips
// large objects; and a blob's chunks commit with its row under one
// deferred foreign key, so the schema itself says no chunk lives without
// its blob. pgx copies a chunk into a reused buffer on both ways (COPY's
// send buffer, pgtype.PreallocBytes), so moving a blob allocates about
// a chunk or two, not its size.
package store
