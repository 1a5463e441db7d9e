package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// maxAgentTools mirrors the catalog's limit of tools per agent
// (catalog.MaxAgentTools): a promotion never grows an agent past it.
const maxAgentTools = 128

const (
	sqlPromoteAfter = `SELECT promote_after FROM tenants WHERE tenant_id = $1`

	sqlSetPromoteAfter = `UPDATE tenants SET promote_after = $2, updated_at = now()
WHERE tenant_id = $1 AND promote_after <> $2`

	sqlRecordRun = `INSERT INTO pipeline_runs (tenant_id, shape, job_id, call_id) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING`

	// Each recorded run takes away a few runs older than 30 days: a shape
	// is promoted when it is run again within that time.
	sqlTrimRuns = `DELETE FROM pipeline_runs WHERE ctid IN (
SELECT ctid FROM pipeline_runs WHERE created_at < now() - interval '30 days' LIMIT 20)`

	sqlCountRuns = `SELECT count(*) FROM pipeline_runs WHERE tenant_id = $1 AND shape = $2`

	sqlCompositeExists = `SELECT EXISTS (SELECT 1 FROM composites WHERE tenant_id = $1 AND shape = $2)`

	sqlToolExists = `SELECT EXISTS (SELECT 1 FROM tools WHERE tenant_id = $1 AND name = $2)`

	sqlInsertComposite = `INSERT INTO composites (tenant_id, shape, tool_name, runs) VALUES ($1, $2, $3, $4)`

	sqlDeleteRuns = `DELETE FROM pipeline_runs WHERE tenant_id = $1 AND shape = $2`

	// The active versions of the agents that take composites, locked.
	sqlCompositeAgents = `
SELECT a.agent_id, v.spec
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1 AND (v.spec ->> 'composites')::boolean IS TRUE
ORDER BY a.agent_id
FOR UPDATE OF a`

	// The tenant's composite tools, active versions.
	sqlCompositeTools = `
SELECT v.spec
FROM tools t
JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.active_version
WHERE t.tenant_id = $1 AND v.kind = 'composite_pipeline'
ORDER BY t.name`
)

// CompositeKind is the tool kind of composites (pipelinetool.CompositePipeline).
const CompositeKind = "composite_pipeline"

// RecordPipelineRun implements tools.Composites: it records a run of a
// pipeline shape by a call and, once the tenant has run the shape
// promote_after times (by distinct calls) and has no composite of it,
// stores composite as a new tool of the tenant — under its name, or its
// name with _2, _3… when that is taken — gives every agent that takes
// composites a new version with it, and returns the name. Runs, the tool
// and the agent versions are written in one transaction under the tenant's
// catalog lock, so concurrent runs promote a shape once.
func (s *Store) RecordPipelineRun(ctx context.Context, tenantID, jobID, callID, shape string, composite agent.Tool) (string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return "", err
	}
	var name string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var after int
		err := tx.QueryRow(ctx, sqlPromoteAfter, tenantID).Scan(&after)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && after == 0) {
			return nil // no catalog, or promotion off: nothing to count
		}
		if err != nil {
			return fmt.Errorf("read promote_after: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlRecordRun, tenantID, shape, jobID, callID); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlTrimRuns); err != nil {
			return fmt.Errorf("trim runs: %w", err)
		}
		var runs int
		if err := tx.QueryRow(ctx, sqlCountRuns, tenantID, shape).Scan(&runs); err != nil {
			return fmt.Errorf("count runs: %w", err)
		}
		if runs < after {
			return nil
		}
		// Promote, under the catalog lock; the check is made again under it.
		if _, err := tx.Exec(ctx, sqlLockTenantCatalog, tenantID); err != nil {
			return fmt.Errorf("lock catalog: %w", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, sqlCompositeExists, tenantID, shape).Scan(&exists); err != nil || exists {
			return err
		}
		name, err = promote(ctx, tx, tenantID, shape, runs, composite)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("tenant %q: record pipeline run: %w", tenantID, err)
	}
	return name, nil
}

// promote stores composite as a tool of the tenant and grants it.
func promote(ctx context.Context, tx pgx.Tx, tenantID, shape string, runs int, composite agent.Tool) (string, error) {
	name, err := freeToolName(ctx, tx, tenantID, composite.Name)
	if err != nil {
		return "", err
	}
	composite.Name, composite.Kind, composite.Version, composite.SpecHash = name, CompositeKind, 0, ""
	spec, hash, err := canonicalJSON(composite)
	if err != nil {
		return "", fmt.Errorf("encode composite: %w", err)
	}
	action, version, err := putVersion(ctx, tx, toolVersions, tenantID, name, spec, hash)
	if err != nil {
		return "", fmt.Errorf("store composite %q: %w", name, err)
	}
	changes := []Change{{Kind: KindTool, TenantID: tenantID, Name: name, Action: action, Version: version}}
	composite.Version, composite.SpecHash = version, hash

	agents, err := collect(ctx, tx, func(row pgx.CollectableRow) (agent.Agent, error) {
		var id string
		var raw []byte
		if err := row.Scan(&id, &raw); err != nil {
			return agent.Agent{}, err
		}
		var a agent.Agent
		if err := json.Unmarshal(raw, &a); err != nil {
			return agent.Agent{}, fmt.Errorf("decode agent %q: %w", id, err)
		}
		return a, nil
	}, sqlCompositeAgents, tenantID)
	if err != nil {
		return "", fmt.Errorf("load agents that take composites: %w", err)
	}
	for _, a := range agents {
		if _, has := a.Tool(name); has || len(a.Tools) >= maxAgentTools {
			continue
		}
		a.Tools = append(a.Tools, composite)
		a.Version = 0
		spec, hash, err := canonicalJSON(a)
		if err != nil {
			return "", fmt.Errorf("encode agent %q: %w", a.ID, err)
		}
		action, version, err := putVersion(ctx, tx, agentVersions, tenantID, a.ID, spec, hash)
		if err != nil {
			return "", fmt.Errorf("grant composite to agent %q: %w", a.ID, err)
		}
		changes = append(changes, Change{Kind: KindAgent, TenantID: tenantID, Name: a.ID, Action: action, Version: version})
	}
	if _, err := tx.Exec(ctx, sqlInsertComposite, tenantID, shape, name, runs); err != nil {
		return "", fmt.Errorf("record composite: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlDeleteRuns, tenantID, shape); err != nil {
		return "", fmt.Errorf("forget runs: %w", err)
	}
	return name, bumpIfChanged(ctx, tx, tenantID, changes)
}

// freeToolName is base, or base_2, base_3… the first the tenant has no
// tool of.
func freeToolName(ctx context.Context, tx pgx.Tx, tenantID, base string) (string, error) {
	for i := 1; i <= 100; i++ {
		name := base
		if i > 1 {
			suffix := fmt.Sprintf("_%d", i)
			name = base[:min(len(base), 64-len(suffix))] + suffix
		}
		var taken bool
		if err := tx.QueryRow(ctx, sqlToolExists, tenantID, name).Scan(&taken); err != nil {
			return "", fmt.Errorf("look up tool %q: %w", name, err)
		}
		if !taken {
			return name, nil
		}
	}
	return "", fmt.Errorf("no free name for composite %q", base)
}

// grantComposites adds the tenant's composite tools to an agent that
// takes them, after those it lists.
func grantComposites(ctx context.Context, tx pgx.Tx, tenantID string, tools []agent.Tool) ([]agent.Tool, error) {
	composites, err := collect(ctx, tx, scanJSON[agent.Tool], sqlCompositeTools, tenantID)
	if err != nil {
		return nil, fmt.Errorf("load composites: %w", err)
	}
	for _, c := range composites {
		if len(tools) >= maxAgentTools {
			break
		}
		if !slices.ContainsFunc(tools, func(t agent.Tool) bool { return t.Name == c.Name }) {
			tools = append(tools, c)
		}
	}
	return tools, nil
}

// scanJSON reads a row of one JSON column into a T.
func scanJSON[T any](row pgx.CollectableRow) (T, error) {
	var raw []byte
	var v T
	if err := row.Scan(&raw); err != nil {
		return v, err
	}
	return v, json.Unmarshal(raw, &v)
}

// sqlSearchTools matches any word of the query (stemmed, stop words left
// out) against tools' names, descriptions and arguments, best first.
const sqlSearchTools = `
WITH q AS (
  SELECT to_tsquery('english', coalesce(string_agg(quote_literal(l), ' | '), '')) AS q
  FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS l
)
SELECT v.spec
FROM tools t
JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.active_version, q
WHERE t.tenant_id = $1
  AND to_tsvector('english', translate(v.name, '_-', '  ') || ' ' || coalesce(v.spec ->> 'description', '') || ' ' || coalesce(v.spec ->> 'parameters', '')) @@ q.q
ORDER BY ts_rank_cd(to_tsvector('english', translate(v.name, '_-', '  ') || ' ' || coalesce(v.spec ->> 'description', '') || ' ' || coalesce(v.spec ->> 'parameters', '')), q.q) DESC, t.name
LIMIT $3`

// SearchTools implements tools.ToolSearch: the tenant's tools whose name,
// description or arguments share a word with query, best first.
func (s *Store) SearchTools(ctx context.Context, tenantID, query string, limit int) ([]agent.Tool, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	found, err := collect(ctx, s.pool, scanJSON[agent.Tool], sqlSearchTools, tenantID, query, limit)
	if err != nil {
		return nil, fmt.Errorf("search tools of tenant %q: %w", tenantID, err)
	}
	return found, nil
}
