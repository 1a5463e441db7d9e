package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// putVersionFunc stores a version of a tool or an agent (putVersion,
// stageVersion).
type putVersionFunc func(ctx context.Context, tx pgx.Tx, q versioned, tenantID, name string, spec []byte, hash string) (string, int, error)

// putSpec stores v, encoded by canonicalJSON, by put.
func putSpec(ctx context.Context, tx pgx.Tx, put putVersionFunc, q versioned, tenantID, name string, v any) (string, int, error) {
	spec, hash, err := canonicalJSON(v)
	if err != nil {
		return "", 0, err
	}
	return put(ctx, tx, q, tenantID, name, spec, hash)
}

// versioned holds the statements for one kind of versioned catalog entry
// (a head row with the active version, plus immutable version rows).
type versioned struct {
	active     string // $1 tenant, $2 name → active version, its spec_hash
	insertHead string // $1 tenant, $2 name; active version 1
	insert     string // $1 tenant, $2 name, $3 version, $4 spec, $5 spec_hash
	activate   string // $1 tenant, $2 name, $3 version
	latest     string // $1 tenant, $2 name → the newest version, its spec_hash
}

var agentVersions = versioned{
	active: `
SELECT a.active_version, v.spec_hash
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1 AND a.agent_id = $2
FOR UPDATE OF a`,
	insertHead: `INSERT INTO agents (tenant_id, agent_id, active_version) VALUES ($1, $2, 1)`,
	insert: `
INSERT INTO agent_versions (tenant_id, agent_id, version, spec, spec_hash)
VALUES ($1, $2, $3, $4, $5)`,
	activate: `UPDATE agents SET active_version = $3, updated_at = now() WHERE tenant_id = $1 AND agent_id = $2`,
	latest: `
SELECT version, spec_hash FROM agent_versions
WHERE tenant_id = $1 AND agent_id = $2 ORDER BY version DESC LIMIT 1`,
}

var toolVersions = versioned{
	active: `
SELECT t.active_version, v.spec_hash
FROM tools t
JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.active_version
WHERE t.tenant_id = $1 AND t.name = $2
FOR UPDATE OF t`,
	insertHead: `INSERT INTO tools (tenant_id, name, active_version) VALUES ($1, $2, 1)`,
	insert: `
INSERT INTO tool_versions (tenant_id, name, version, kind, spec, spec_hash)
VALUES ($1, $2, $3, $4::jsonb ->> 'kind', $4, $5)`,
	activate: `UPDATE tools SET active_version = $3, updated_at = now() WHERE tenant_id = $1 AND name = $2`,
	latest: `
SELECT version, spec_hash FROM tool_versions
WHERE tenant_id = $1 AND name = $2 ORDER BY version DESC LIMIT 1`,
}

// versionOf is a stored version and its spec's hash.
type versionOf struct {
	n    int
	hash string
}

// versionsOf reads the active version of (tenant, name) and the newest,
// locking the head row; found is false when the tenant has no such entry.
func versionsOf(ctx context.Context, tx pgx.Tx, q versioned, tenantID, name string) (active, latest versionOf, found bool, err error) {
	err = tx.QueryRow(ctx, q.active, tenantID, name).Scan(&active.n, &active.hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return active, latest, false, nil
	case err != nil:
		return active, latest, false, fmt.Errorf("read active version: %w", err)
	}
	if err := tx.QueryRow(ctx, q.latest, tenantID, name).Scan(&latest.n, &latest.hash); err != nil {
		return active, latest, false, fmt.Errorf("newest version: %w", err)
	}
	return active, latest, true, nil
}

// putVersion stores spec as the active version of (tenant, name) unless the
// active version already has the same hash. Versions only grow: returning to
// an earlier spec creates a new version with that spec, unless it is the
// newest version, staged (StageCatalog): that one becomes active.
func putVersion(ctx context.Context, tx pgx.Tx, q versioned, tenantID, name string, spec []byte, hash string) (string, int, error) {
	active, latest, found, err := versionsOf(ctx, tx, q, tenantID, name)
	switch {
	case err != nil:
		return "", 0, err
	case !found:
		if _, err := tx.Exec(ctx, q.insertHead, tenantID, name); err != nil {
			return "", 0, fmt.Errorf("insert: %w", err)
		}
		if _, err := tx.Exec(ctx, q.insert, tenantID, name, 1, spec, hash); err != nil {
			return "", 0, fmt.Errorf("insert version: %w", err)
		}
		return ActionCreated, 1, nil
	case active.hash == hash:
		return ActionUnchanged, active.n, nil
	}
	next := latest.n
	if latest.n == active.n || latest.hash != hash {
		next = latest.n + 1
		if _, err := tx.Exec(ctx, q.insert, tenantID, name, next, spec, hash); err != nil {
			return "", 0, fmt.Errorf("insert version: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, q.activate, tenantID, name, next); err != nil {
		return "", 0, fmt.Errorf("activate version: %w", err)
	}
	return ActionUpdated, next, nil
}

// stageVersion stores spec as a new version of (tenant, name) without
// activating it, unless the active version or the newest has the same
// hash; ActionNotStaged when the tenant has no such entry yet.
func stageVersion(ctx context.Context, tx pgx.Tx, q versioned, tenantID, name string, spec []byte, hash string) (string, int, error) {
	active, latest, found, err := versionsOf(ctx, tx, q, tenantID, name)
	switch {
	case err != nil:
		return "", 0, err
	case !found:
		return ActionNotStaged, 0, nil
	case active.hash == hash:
		return ActionUnchanged, active.n, nil
	case latest.n > active.n && latest.hash == hash:
		return ActionStaged, latest.n, nil
	}
	if _, err := tx.Exec(ctx, q.insert, tenantID, name, latest.n+1, spec, hash); err != nil {
		return "", 0, fmt.Errorf("insert version: %w", err)
	}
	return ActionStaged, latest.n + 1, nil
}
