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

// KindProcess is the Change kind of process definitions.
const KindProcess = "process"

// processContent is what a process version's content hash covers: a
// schema change is a change of the process as much as a definition's.
type processContent struct {
	Definition json.RawMessage `json:"definition"`
	Schema     json.RawMessage `json:"schema,omitempty"`
}

func contentHash(def, schema json.RawMessage) (string, error) {
	_, hash, err := canonicalJSON(processContent{Definition: def, Schema: schema})
	return hash, err
}

const (
	sqlProcessHead = `
SELECT p.latest_version, p.catalog_version, p.description, c.content_hash, l.content_hash
FROM processes p
JOIN process_versions c ON c.tenant_id = p.tenant_id AND c.tag = p.tag AND c.version = p.catalog_version
JOIN process_versions l ON l.tenant_id = p.tenant_id AND l.tag = p.tag AND l.version = p.latest_version
WHERE p.tenant_id = $1 AND p.tag = $2
FOR UPDATE OF p`

	sqlInsertProcess = `
INSERT INTO processes (tenant_id, tag, description, latest_version, catalog_version) VALUES ($1, $2, $3, 1, 1)`

	sqlInsertProcessVersion = `
INSERT INTO process_versions (tenant_id, tag, version, definition, schema, content_hash, source)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

	sqlUpdateProcessHead = `
UPDATE processes SET latest_version = $3, catalog_version = $4, description = $5, updated_at = now()
WHERE tenant_id = $1 AND tag = $2`

	// The patched versions after the catalog's: what a new catalog
	// version supersedes.
	sqlPatchedSince = `
SELECT coalesce(min(version), 0), coalesce(max(version), 0) FROM process_versions
WHERE tenant_id = $1 AND tag = $2 AND source = 'patch' AND version > $3`
)

// applyProcesses stores a tenant's process definitions from its catalog.
//
// The catalog's definition is a process's initial version. Patches build
// on the latest version, and applying the catalog again unchanged — as
// every deploy does — leaves them the latest. Only when an entry's
// definition or schema differs from what the catalog last gave does it
// become a new latest version, recorded as from the catalog; the versions
// between stay in the history, and the change's Note says which patched
// versions it supersedes, in a dry run too. An entry equal to the latest
// version (the patched definition copied into the catalog) is adopted
// without a new version. A description change updates the process in
// place: it is not part of a version.
func applyProcesses(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog) ([]Change, error) {
	var changes []Change
	for _, p := range tc.Processes {
		ch, err := applyProcess(ctx, tx, tc.TenantID, p)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: process %q: %w", tc.TenantID, p.Tag, err)
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

func applyProcess(ctx context.Context, tx pgx.Tx, tenantID string, p agent.Process) (Change, error) {
	if err := requireID("tag", p.Tag); err != nil {
		return Change{}, err
	}
	if !json.Valid(p.Definition) || (len(p.Schema) > 0 && !json.Valid(p.Schema)) {
		return Change{}, agent.Errorf(agent.CodeInvalid, "definition and schema must be JSON")
	}
	hash, err := contentHash(p.Definition, p.Schema)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Kind: KindProcess, TenantID: tenantID, Name: p.Tag}
	var latest, fromCatalog int
	var description, catalogHash, latestHash string
	err = tx.QueryRow(ctx, sqlProcessHead, tenantID, p.Tag).Scan(&latest, &fromCatalog, &description, &catalogHash, &latestHash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, sqlInsertProcess, tenantID, p.Tag, p.Description); err != nil {
			return Change{}, fmt.Errorf("insert: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlInsertProcessVersion, tenantID, p.Tag, 1, []byte(p.Definition), nullJSON(p.Schema), hash, agent.ProcessFromCatalog); err != nil {
			return Change{}, fmt.Errorf("insert version: %w", err)
		}
		ch.Action, ch.Version = ActionCreated, 1
		return ch, nil
	case err != nil:
		return Change{}, fmt.Errorf("read latest version: %w", err)
	}
	ch.Version = latest
	switch {
	case hash == catalogHash && description == p.Description:
		ch.Action = ActionUnchanged
		return ch, nil
	case hash == catalogHash || hash == latestHash:
		// A new description, or the catalog catching up with the
		// patches: the latest version stands.
		ch.Action = ActionUpdated
		if hash != catalogHash {
			ch.Note = fmt.Sprintf("the catalog now matches v%d", latest)
			fromCatalog = latest
		}
		if _, err := tx.Exec(ctx, sqlUpdateProcessHead, tenantID, p.Tag, latest, fromCatalog, p.Description); err != nil {
			return Change{}, fmt.Errorf("update: %w", err)
		}
		return ch, nil
	}
	var first, last int
	if err := tx.QueryRow(ctx, sqlPatchedSince, tenantID, p.Tag, fromCatalog).Scan(&first, &last); err != nil {
		return Change{}, fmt.Errorf("read patched versions: %w", err)
	}
	next := latest + 1
	if _, err := tx.Exec(ctx, sqlInsertProcessVersion, tenantID, p.Tag, next, []byte(p.Definition), nullJSON(p.Schema), hash, agent.ProcessFromCatalog); err != nil {
		return Change{}, fmt.Errorf("insert version: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlUpdateProcessHead, tenantID, p.Tag, next, next, p.Description); err != nil {
		return Change{}, fmt.Errorf("update: %w", err)
	}
	ch.Action, ch.Version = ActionUpdated, next
	switch {
	case first == 0:
	case first == last:
		ch.Note = fmt.Sprintf("supersedes patched v%d, kept in the history", first)
	default:
		ch.Note = fmt.Sprintf("supersedes patched v%d–v%d, kept in the history", first, last)
	}
	return ch, nil
}

// nullJSON is NULL for an empty value.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

const (
	sqlProcessVersion = `
SELECT v.tenant_id, v.tag, v.version, p.description, v.schema, v.definition, v.source, coalesce(pp.patch_id, ''), v.created_at, p.latest_version
FROM processes p
JOIN process_versions v ON v.tenant_id = p.tenant_id AND v.tag = p.tag
 AND v.version = CASE WHEN $3::int = 0 THEN p.latest_version ELSE $3::int END
LEFT JOIN process_patches pp ON pp.tenant_id = v.tenant_id AND pp.tag = v.tag AND pp.to_version = v.version
WHERE p.tenant_id = $1 AND p.tag = $2`

	sqlLatestProcesses = `
SELECT v.tenant_id, v.tag, v.version, p.description, v.schema, v.definition, v.source, coalesce(pp.patch_id, ''), v.created_at, p.latest_version
FROM processes p
JOIN process_versions v ON v.tenant_id = p.tenant_id AND v.tag = p.tag AND v.version = p.latest_version
LEFT JOIN process_patches pp ON pp.tenant_id = v.tenant_id AND pp.tag = v.tag AND pp.to_version = v.version
WHERE p.tenant_id = $1
ORDER BY p.tag`

	sqlLatestVersion = `SELECT latest_version FROM processes WHERE tenant_id = $1 AND tag = $2`

	sqlProcessTags = `SELECT tag FROM processes WHERE tenant_id = $1 ORDER BY tag LIMIT 20`
)

func scanProcessVersion(row pgx.Row) (agent.ProcessVersion, error) {
	var v agent.ProcessVersion
	var schema, def []byte
	err := row.Scan(&v.TenantID, &v.Tag, &v.Version, &v.Description, &schema, &def, &v.Source, &v.PatchID, &v.CreatedAt, &v.Latest)
	v.Schema, v.Definition = schema, def
	return v, err
}

// Process returns a version of a tenant's process (version 0: the
// latest). agent.CodeNotFound names the tenant's processes, or the
// versions there are.
func (s *Store) Process(ctx context.Context, tenantID, tag string, version int) (agent.ProcessVersion, error) {
	if err := requireKey(tenantID, "tag", tag); err != nil {
		return agent.ProcessVersion{}, err
	}
	if version < 0 {
		return agent.ProcessVersion{}, agent.Errorf(agent.CodeInvalid, "process version must be positive (or 0 for the latest), got %d", version)
	}
	v, err := scanProcessVersion(s.pool.QueryRow(ctx, sqlProcessVersion, tenantID, tag, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.ProcessVersion{}, s.processNotFound(ctx, tenantID, tag, version)
	}
	if err != nil {
		return agent.ProcessVersion{}, fmt.Errorf("load process %q: %w", tag, err)
	}
	return v, nil
}

// processNotFound says what the tenant has instead.
func (s *Store) processNotFound(ctx context.Context, tenantID, tag string, version int) error {
	var latest int
	err := s.pool.QueryRow(ctx, sqlLatestVersion, tenantID, tag).Scan(&latest)
	if err == nil {
		return agent.Errorf(agent.CodeNotFound, "process %q has no version %d; its versions are 1 to %d", tag, version, latest)
	}
	rows, qerr := s.pool.Query(ctx, sqlProcessTags, tenantID)
	if qerr != nil {
		return agent.Errorf(agent.CodeNotFound, "tenant %q has no process %q", tenantID, tag)
	}
	tags, qerr := pgx.CollectRows(rows, pgx.RowTo[string])
	if qerr != nil || len(tags) == 0 {
		return agent.Errorf(agent.CodeNotFound, "tenant %q has no process %q (it has none)", tenantID, tag)
	}
	return agent.Errorf(agent.CodeNotFound, "tenant %q has no process %q; its processes: %s", tenantID, tag, strings.Join(tags, ", "))
}

// Processes returns the latest version of each of the tenant's
// processes, by tag.
func (s *Store) Processes(ctx context.Context, tenantID string) ([]agent.ProcessVersion, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.ProcessVersion, error) { return scanProcessVersion(row) }, sqlLatestProcesses, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list processes of tenant %q: %w", tenantID, err)
	}
	return out, nil
}

const (
	sqlProcessHistory = `
SELECT v.tenant_id, v.tag, v.version, p.description, v.source, v.created_at, p.latest_version,
       pp.patch_id, pp.job_id, pp.workflow_id, pp.call_id, pp.approver, pp.description, pp.operations,
       pp.from_version, pp.to_version, pp.created_at
FROM processes p
JOIN process_versions v ON v.tenant_id = p.tenant_id AND v.tag = p.tag
LEFT JOIN process_patches pp ON pp.tenant_id = v.tenant_id AND pp.tag = v.tag AND pp.to_version = v.version
WHERE p.tenant_id = $1 AND p.tag = $2
ORDER BY v.version`

	sqlPatchOfCall = `
SELECT tenant_id, patch_id, tag, job_id, workflow_id, call_id, approver, description, operations, from_version, to_version, created_at
FROM process_patches WHERE tenant_id = $1 AND job_id = $2 AND call_id = $3`
)

// ProcessHistory returns every version of a process, oldest first, each
// with the patch that made it (definitions left out: read a version with
// Process).
func (s *Store) ProcessHistory(ctx context.Context, tenantID, tag string) ([]agent.ProcessHistoryEntry, error) {
	if err := requireKey(tenantID, "tag", tag); err != nil {
		return nil, err
	}
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.ProcessHistoryEntry, error) {
		var e agent.ProcessHistoryEntry
		v := &e.Version
		var patchID, jobID, workflowID, callID, approver, description *string
		var ops []byte
		var from, to *int
		var at *time.Time
		if err := row.Scan(&v.TenantID, &v.Tag, &v.Version, &v.Description, &v.Source, &v.CreatedAt, &v.Latest,
			&patchID, &jobID, &workflowID, &callID, &approver, &description, &ops, &from, &to, &at); err != nil {
			return e, err
		}
		if patchID != nil {
			v.PatchID = *patchID
			e.Patch = &agent.ProcessPatch{PatchID: *patchID, TenantID: v.TenantID, Tag: v.Tag, JobID: *jobID, WorkflowID: *workflowID,
				CallID: *callID, Approver: *approver, Description: *description, Operations: ops, FromVersion: *from, ToVersion: *to, CreatedAt: *at}
		}
		return e, nil
	}, sqlProcessHistory, tenantID, tag)
	if err != nil {
		return nil, fmt.Errorf("load history of process %q: %w", tag, err)
	}
	if len(out) == 0 {
		return nil, s.processNotFound(ctx, tenantID, tag, 0)
	}
	return out, nil
}

func scanPatch(row pgx.Row) (agent.ProcessPatch, error) {
	var p agent.ProcessPatch
	var ops []byte
	err := row.Scan(&p.TenantID, &p.PatchID, &p.Tag, &p.JobID, &p.WorkflowID, &p.CallID, &p.Approver, &p.Description, &ops,
		&p.FromVersion, &p.ToVersion, &p.CreatedAt)
	p.Operations = ops
	return p, err
}

// ProcessPatchOf returns the patch a tool call made; agent.CodeNotFound
// when it made none.
func (s *Store) ProcessPatchOf(ctx context.Context, tenantID, jobID, callID string) (agent.ProcessPatch, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return agent.ProcessPatch{}, err
	}
	p, err := scanPatch(s.pool.QueryRow(ctx, sqlPatchOfCall, tenantID, jobID, callID))
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "call %q of job %q made no process patch", callID, jobID), "load patch of call %q", callID); err != nil {
		return agent.ProcessPatch{}, err
	}
	return p, nil
}

const (
	// Compare and set: the version moves only from the one the patch was
	// made on. A concurrent patch of the same version finds it moved and
	// is refused, so that neither is lost.
	sqlAdvanceProcess = `
UPDATE processes SET latest_version = $4, updated_at = now()
WHERE tenant_id = $1 AND tag = $2 AND latest_version = $3`

	sqlPatchedVersion = `
INSERT INTO process_versions (tenant_id, tag, version, definition, schema, content_hash, source)
SELECT tenant_id, tag, $4, $5, schema, $6, 'patch' FROM process_versions
WHERE tenant_id = $1 AND tag = $2 AND version = $3
RETURNING created_at`

	sqlVersionSchema = `SELECT schema FROM process_versions WHERE tenant_id = $1 AND tag = $2 AND version = $3`

	// The person who approved the call, if it waited for one.
	sqlApproverOf = `
SELECT approver FROM approvals
WHERE tenant_id = $1 AND job_id = $2 AND call_id = $3 AND outcome = 'approved'
ORDER BY decided_at DESC LIMIT 1`

	sqlInsertPatch = `
INSERT INTO process_patches (tenant_id, patch_id, tag, job_id, workflow_id, call_id, approver, description, operations,
                             from_version, to_version, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
)

// PatchID is the id of the patch a tool call makes: the same for every
// attempt of the call.
func PatchID(tenantID, jobID, callID string) string {
	sum := sha256.Sum256([]byte(tenantID + "\x00" + jobID + "\x00" + callID))
	return "patch-" + hex.EncodeToString(sum[:10])
}

// PatchProcess stores def as the next version of process p.Tag, made from
// version p.FromVersion by the tool call p names (TenantID, JobID,
// WorkflowID, CallID) with p.Description and p.Operations, and records the
// patch — with the call's approver from the approvals table — in the same
// transaction. It returns the patch as recorded.
//
// Idempotent: when the call already made a patch, that patch is returned
// and nothing is written. agent.CodeConflict when p.FromVersion is no
// longer the latest (a concurrent patch won: read the latest and patch it
// again); agent.CodeNotFound when the process does not exist. def is
// stored as given: check it first (internal/process).
func (s *Store) PatchProcess(ctx context.Context, p agent.ProcessPatch, def json.RawMessage) (agent.ProcessPatch, error) {
	if err := requireKey(p.TenantID, "tag", p.Tag); err != nil {
		return agent.ProcessPatch{}, err
	}
	if err := requireJobKey(p.TenantID, p.JobID); err != nil {
		return agent.ProcessPatch{}, err
	}
	switch {
	case p.CallID == "":
		return agent.ProcessPatch{}, agent.Errorf(agent.CodeInvalid, "patch of process %q: call_id is required", p.Tag)
	case p.FromVersion <= 0:
		return agent.ProcessPatch{}, agent.Errorf(agent.CodeInvalid, "patch of process %q: from_version must be positive", p.Tag)
	case !json.Valid(def) || !json.Valid(p.Operations):
		return agent.ProcessPatch{}, agent.Errorf(agent.CodeInvalid, "patch of process %q: definition and operations must be JSON", p.Tag)
	}
	var out agent.ProcessPatch
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		prior, err := scanPatch(tx.QueryRow(ctx, sqlPatchOfCall, p.TenantID, p.JobID, p.CallID))
		if err == nil {
			out = prior
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("look up patch of call %q: %w", p.CallID, err)
		}
		to := p.FromVersion + 1
		tag, err := tx.Exec(ctx, sqlAdvanceProcess, p.TenantID, p.Tag, p.FromVersion, to)
		if err != nil {
			return fmt.Errorf("advance version: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var latest int
			err := tx.QueryRow(ctx, sqlLatestVersion, p.TenantID, p.Tag).Scan(&latest)
			if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "tenant %q has no process %q", p.TenantID, p.Tag), "read latest version"); err != nil {
				return err
			}
			return agent.Errorf(agent.CodeConflict, "process %q is at version %d, not %d: another patch came first", p.Tag, latest, p.FromVersion)
		}
		var schema []byte
		if err := tx.QueryRow(ctx, sqlVersionSchema, p.TenantID, p.Tag, p.FromVersion).Scan(&schema); err != nil {
			return fmt.Errorf("read version %d: %w", p.FromVersion, err)
		}
		hash, err := contentHash(def, schema)
		if err != nil {
			return err
		}
		var at time.Time
		if err := tx.QueryRow(ctx, sqlPatchedVersion, p.TenantID, p.Tag, p.FromVersion, to, []byte(def), hash).Scan(&at); err != nil {
			return fmt.Errorf("insert version %d: %w", to, err)
		}
		approver := ""
		if err := tx.QueryRow(ctx, sqlApproverOf, p.TenantID, p.JobID, p.CallID).Scan(&approver); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read approval of call %q: %w", p.CallID, err)
		}
		out = agent.ProcessPatch{PatchID: PatchID(p.TenantID, p.JobID, p.CallID), TenantID: p.TenantID, Tag: p.Tag,
			JobID: p.JobID, WorkflowID: p.WorkflowID, CallID: p.CallID, Approver: approver, Description: p.Description,
			Operations: p.Operations, FromVersion: p.FromVersion, ToVersion: to, CreatedAt: at}
		if _, err := tx.Exec(ctx, sqlInsertPatch, out.TenantID, out.PatchID, out.Tag, out.JobID, out.WorkflowID, out.CallID,
			out.Approver, out.Description, string(out.Operations), out.FromVersion, out.ToVersion, out.CreatedAt); err != nil {
			if pgCode(err) == pgUniqueViolation {
				// The same call, in a concurrent attempt, got there first.
				return agent.Errorf(agent.CodeConflict, "call %q patched process %q concurrently", p.CallID, p.Tag)
			}
			return fmt.Errorf("record patch: %w", err)
		}
		return nil
	})
	if err != nil {
		if agent.IsCode(err, agent.CodeConflict) || agent.IsCode(err, agent.CodeNotFound) {
			return agent.ProcessPatch{}, err
		}
		return agent.ProcessPatch{}, fmt.Errorf("patch process %q: %w", p.Tag, err)
	}
	return out, nil
}
