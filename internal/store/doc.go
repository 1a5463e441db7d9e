// Package store keeps agentflow's durable state in Postgres through pgx: the
// per-tenant catalog (tools, agents and their immutable versions, routing
// rules, a catalog version), turns and their steps, session transcripts,
// turn results, approval decisions and content-addressed blobs.
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
package store
