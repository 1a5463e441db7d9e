package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Retention.
//
// The operator's TTLs (Options.Retention) bound every tenant's; a
// tenant's catalog may narrow them (tenants.retention, checked by
// ApplyCatalog). A sweep deletes what is older than a tenant's TTL one
// batch at a time (Sweep), each batch one transaction that also appends
// what it deleted to audit_log, so the log never misses or invents a
// deletion, and a retried batch deletes only what is still there.
//
// What each kind is:
//   - blobs: the tenant's blob_owners rows (its right to read a blob),
//     unless a result of the tenant still names the blob (cas_id or
//     data_ref). A blob that has lost its last owner and that no result
//     names goes whole: its row, its chunks (by cascade) and its object.
//   - results: agent_results rows; a result's payload blob is freed the
//     same way.
//   - transcripts: what a turn and a session said — turns (the request,
//     with its prompt) with their turn_steps, and session_messages, whose
//     session then loses its summary, which was made of them. The turn's
//     live token batches (live_batches) and MCP streams expire on their
//     own within hours; the workflow histories are Temporal's, kept for
//     the namespace's retention period.
//
// Blobs are content addressed, so a writer may store again the very bytes
// a sweep is deleting. A writer of an object takes a shared lock on the
// blob's hash from before its upload until its row is committed
// (writeObject); a sweep takes the exclusive one before it decides that a
// blob is unowned, and holds it until its delete — object included — is
// committed. So a sweep never deletes an object a writer has uploaded for
// a row it is about to add, and a writer never adds a row for an object a
// sweep has decided to delete: it waits, then uploads the object again.
// Inline and chunked blobs keep their bytes in their row, which a writer
// adds or finds in one statement; an owner or result added for a row a
// sweep has just deleted fails its foreign key, and the writer's retry
// stores the bytes again.

// RetentionKind names what a sweep deletes.
type RetentionKind string

// The kinds, in the order a sweep takes them: results before blobs, so
// that blobs only expired results named go in the same run.
const (
	RetainResults     RetentionKind = "results"
	RetainBlobs       RetentionKind = "blobs"
	RetainTranscripts RetentionKind = "transcripts"
)

// RetentionKinds are the kinds in sweep order.
var RetentionKinds = []RetentionKind{RetainResults, RetainBlobs, RetainTranscripts}

// DefaultSweepBatch is how many rows a batch deletes at most.
const DefaultSweepBatch = 1000

// TenantRetention is the TTLs that apply to a tenant: its own within the
// operator's.
type TenantRetention struct {
	TenantID  string
	Retention agent.Retention
}

// Sweep is one batch of a retention sweep.
type Sweep struct {
	RunID    string // the sweep's workflow id, for the audit log
	TenantID string
	Kind     RetentionKind
	// Before: rows written before it are expired (the run's start less
	// the kind's TTL), the same for every batch and retry of a run.
	Before time.Time
	Limit  int // rows at most; default DefaultSweepBatch
}

// Swept is what a batch deleted.
type Swept struct {
	Deleted int // rows of the kind
	Freed   int // blobs that went whole with them
	Objects int // of those, objects deleted from the object store
	// More: the batch was full, so more may be expired.
	More bool
	// Statements the batch ran, for the benchmark.
	Statements int
}

const (
	sqlRetentionTenants = `SELECT tenant_id, retention FROM tenants ORDER BY tenant_id`
	sqlSetRetention     = `UPDATE tenants SET retention = $2::jsonb, updated_at = now()
WHERE tenant_id = $1 AND retention IS DISTINCT FROM $2::jsonb`

	// Locks of a blob's hash (the package comment above): writers share
	// it, a sweep holds it alone. A hash of the key may collide with
	// another lock's: that only makes one wait for the other.
	sqlLockBlobShared = `SELECT pg_advisory_xact_lock_shared(hashtextextended('agentflow.blob/' || $1, 0))`
	sqlLockBlobs      = `SELECT count(pg_advisory_xact_lock(hashtextextended('agentflow.blob/' || h, 0)))
FROM (SELECT DISTINCT h FROM unnest($1::text[]) h ORDER BY h) x`

	sqlSweepOwners = `
DELETE FROM blob_owners o WHERE o.tenant_id = $1 AND o.sha256 IN (
  SELECT b.sha256 FROM blob_owners b
  WHERE b.tenant_id = $1 AND b.created_at < $2
    AND NOT EXISTS (SELECT 1 FROM agent_results r WHERE r.tenant_id = $1 AND r.cas_id = b.sha256)
    AND NOT EXISTS (SELECT 1 FROM agent_results r WHERE r.tenant_id = $1 AND r.data_ref = 'cas://sha256:' || b.sha256)
  ORDER BY b.created_at, b.sha256 LIMIT $3 FOR UPDATE SKIP LOCKED)
RETURNING o.sha256`

	sqlSweepResults = `
DELETE FROM agent_results WHERE result_id IN (
  SELECT result_id FROM agent_results WHERE tenant_id = $1 AND created_at < $2
  ORDER BY created_at, result_id LIMIT $3 FOR UPDATE SKIP LOCKED)
RETURNING job_id, COALESCE(cas_id, '')`

	sqlSweepTurns = `
DELETE FROM turns WHERE tenant_id = $1 AND job_id IN (
  SELECT job_id FROM turns WHERE tenant_id = $1 AND created_at < $2
  ORDER BY created_at, job_id LIMIT $3 FOR UPDATE SKIP LOCKED)
RETURNING job_id`

	sqlSweepMessages = `
WITH gone AS (
  DELETE FROM session_messages WHERE (tenant_id, session_id, seq) IN (
    SELECT tenant_id, session_id, seq FROM session_messages WHERE tenant_id = $1 AND created_at < $2
    ORDER BY created_at, session_id, seq LIMIT $3 FOR UPDATE SKIP LOCKED)
  RETURNING session_id, seq),
forget AS (
  UPDATE sessions s SET summary = '', summary_seq = 0
  WHERE s.tenant_id = $1 AND s.session_id IN (SELECT session_id FROM gone) AND (s.summary <> '' OR s.summary_seq <> 0))
SELECT session_id || '/' || seq FROM gone ORDER BY session_id, seq`

	// A blob goes whole when nothing keeps it: no owner, no result.
	sqlFreeBlobs = `
DELETE FROM cas_blobs b WHERE b.sha256 = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM blob_owners o WHERE o.sha256 = b.sha256)
  AND NOT EXISTS (SELECT 1 FROM agent_results r WHERE r.cas_id = b.sha256)
RETURNING b.sha256, COALESCE(b.object_key, '')`

	sqlAudit = `INSERT INTO audit_log (run_id, tenant_id, kind, count, refs, digest, freed) VALUES ($1, $2, $3, $4, $5, $6, $7)`
)

// RetentionPlan returns every tenant's TTLs: its own within the
// operator's (Options.Retention). A tenant whose TTLs are all 0 keeps
// everything and is left out.
func (s *Store) RetentionPlan(ctx context.Context) ([]TenantRetention, error) {
	rows, err := s.pool.Query(ctx, sqlRetentionTenants)
	if err != nil {
		return nil, fmt.Errorf("retention plan: %w", err)
	}
	var out []TenantRetention
	var id string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		var own agent.Retention
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &own); err != nil {
				return fmt.Errorf("tenant %q: %w", id, err)
			}
		}
		if r := own.Within(s.retention); !r.IsZero() {
			out = append(out, TenantRetention{TenantID: id, Retention: r})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retention plan: %w", err)
	}
	return out, nil
}

// setRetention stores a tenant's retention from its catalog, refused
// when it keeps anything longer than the operator's.
func (s *Store) setRetention(ctx context.Context, tx pgx.Tx, tenantID string, r *agent.Retention) error {
	if r == nil {
		return nil
	}
	if err := r.Narrows(s.retention); err != nil {
		return agent.Errorf(agent.CodeInvalid, "tenant %q: %s", tenantID, err.Error())
	}
	var raw []byte // an empty block removes the tenant's own: the operator's apply
	if !r.IsZero() {
		raw, _ = json.Marshal(r)
	}
	if _, err := tx.Exec(ctx, sqlSetRetention, tenantID, raw); err != nil {
		return fmt.Errorf("apply catalog: retention: %w", err)
	}
	return nil
}

// Sweep deletes one batch of a tenant's expired rows of a kind, with
// what they alone kept, and records it in the audit log, all in one
// transaction. Idempotent: a retry deletes what is still expired.
func (s *Store) Sweep(ctx context.Context, sw Sweep) (Swept, error) {
	if err := requireID("tenant_id", sw.TenantID); err != nil {
		return Swept{}, err
	}
	if sw.RunID == "" || sw.Before.IsZero() {
		return Swept{}, agent.Errorf(agent.CodeInvalid, "a sweep needs its run id and its cutoff")
	}
	sw.Limit = agent.OrDefault(sw.Limit, DefaultSweepBatch)
	b := &sweepBatch{s: s, sw: sw}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b.tx, b.out = tx, Swept{Statements: 2} // BEGIN and COMMIT
		switch sw.Kind {
		case RetainBlobs:
			return b.blobs(ctx)
		case RetainResults:
			return b.results(ctx)
		case RetainTranscripts:
			return b.transcripts(ctx)
		default:
			return agent.Errorf(agent.CodeInvalid, "retention kind %q: want blobs, results or transcripts", sw.Kind)
		}
	})
	if err != nil {
		if _, ok := errors.AsType[*agent.Error](err); ok {
			return Swept{}, err
		}
		return Swept{}, fmt.Errorf("sweep %s of tenant %q: %w", sw.Kind, sw.TenantID, err)
	}
	return b.out, nil
}

// sweepBatch is one Sweep's transaction.
type sweepBatch struct {
	s   *Store
	sw  Sweep
	tx  pgx.Tx
	out Swept
}

func (b *sweepBatch) blobs(ctx context.Context) error {
	sums, err := b.strings(ctx, sqlSweepOwners, b.sw.TenantID, b.sw.Before, b.sw.Limit)
	if err != nil {
		return err
	}
	freed, err := b.free(ctx, sums)
	if err != nil {
		return err
	}
	return b.audit(ctx, sums, freed)
}

func (b *sweepBatch) results(ctx context.Context) error {
	rows, err := b.tx.Query(ctx, sqlSweepResults, b.sw.TenantID, b.sw.Before, b.sw.Limit)
	b.out.Statements++
	if err != nil {
		return err
	}
	jobs, payloads := []string{}, []string{}
	var job, cas string
	_, err = pgx.ForEachRow(rows, []any{&job, &cas}, func() error {
		jobs = append(jobs, job)
		if cas != "" {
			payloads = append(payloads, cas)
		}
		return nil
	})
	if err != nil {
		return err
	}
	freed, err := b.free(ctx, payloads)
	if err != nil {
		return err
	}
	return b.audit(ctx, jobs, freed)
}

// transcripts deletes a batch of turns, then one of session messages
// when the turns did not fill the batch.
func (b *sweepBatch) transcripts(ctx context.Context) error {
	refs, err := b.strings(ctx, sqlSweepTurns, b.sw.TenantID, b.sw.Before, b.sw.Limit)
	if err != nil {
		return err
	}
	for i := range refs {
		refs[i] = "turn:" + refs[i]
	}
	if left := b.sw.Limit - len(refs); left > 0 {
		msgs, err := b.strings(ctx, sqlSweepMessages, b.sw.TenantID, b.sw.Before, left)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			refs = append(refs, "message:"+m)
		}
	}
	return b.audit(ctx, refs, nil)
}

// free deletes the blobs among sums that nothing keeps any more, with
// their objects, under their hashes' locks.
func (b *sweepBatch) free(ctx context.Context, sums []string) ([]string, error) {
	if len(sums) == 0 {
		return nil, nil
	}
	b.out.Statements += 2
	if _, err := b.tx.Exec(ctx, sqlLockBlobs, sums); err != nil {
		return nil, err
	}
	// A statement of its own, after the locks: its snapshot sees every
	// owner a writer that held a lock has committed.
	rows, err := b.tx.Query(ctx, sqlFreeBlobs, sums)
	if err != nil {
		return nil, err
	}
	var freed, keys []string
	var sum, key string
	_, err = pgx.ForEachRow(rows, []any{&sum, &key}, func() error {
		freed = append(freed, sum)
		if key != "" {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 && b.s.objects == nil {
		return nil, agent.Errorf(agent.CodeUnavailable, "%d blobs to delete are kept in an object store, and this process has none configured", len(keys))
	}
	// The objects go before the commit, while the locks are held: a
	// failure rolls the batch back, and the retry deletes them again (a
	// missing object is no error). A commit that fails after leaves rows
	// whose objects are gone, unowned and unnamed: the next sweep that
	// frees them, or a writer of the same bytes, makes them whole.
	if err := b.s.objects.DeleteMany(ctx, keys); err != nil {
		return nil, err
	}
	b.out.Freed, b.out.Objects = len(freed), len(keys)
	return freed, nil
}

// audit records what the batch deleted, and sets its counts.
func (b *sweepBatch) audit(ctx context.Context, refs, freed []string) error {
	b.out.Deleted, b.out.More = len(refs), len(refs) >= b.sw.Limit
	if len(refs) == 0 {
		return nil
	}
	if freed == nil {
		freed = []string{}
	}
	h := sha256.Sum256([]byte(strings.Join(refs, "\n")))
	b.out.Statements++
	_, err := b.tx.Exec(ctx, sqlAudit, b.sw.RunID, b.sw.TenantID, string(b.sw.Kind), len(refs), refs, hex.EncodeToString(h[:]), freed)
	return err
}

// strings runs a query of one text column.
func (b *sweepBatch) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	b.out.Statements++
	rows, err := b.tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if out == nil {
		out = []string{}
	}
	return out, err
}

// AuditEntry is one row of the audit log: what one batch of a sweep
// deleted.
type AuditEntry struct {
	ID       int64         `json:"id"`
	RunID    string        `json:"run_id"`
	TenantID string        `json:"tenant_id"`
	Kind     RetentionKind `json:"kind"`
	Count    int           `json:"count"`
	Refs     []string      `json:"refs"`
	Digest   string        `json:"digest"`
	Freed    []string      `json:"freed"`
	At       time.Time     `json:"at"`
}

// AuditQuery selects audit rows; empty fields select all.
type AuditQuery struct {
	TenantID string
	RunID    string
	Limit    int // default 100
}

const sqlAuditLog = `
SELECT id, run_id, tenant_id, kind, count, refs, digest, freed, at FROM audit_log
WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR run_id = $2)
ORDER BY id DESC LIMIT $3`

// AuditLog returns the newest audit rows first.
func (s *Store) AuditLog(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	q.Limit = agent.OrDefault(q.Limit, 100)
	out, err := collect(ctx, s.pool, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var kind string
		err := r.Scan(&e.ID, &e.RunID, &e.TenantID, &kind, &e.Count, &e.Refs, &e.Digest, &e.Freed, &e.At)
		e.Kind = RetentionKind(kind)
		return e, err
	}, sqlAuditLog, q.TenantID, q.RunID, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}
