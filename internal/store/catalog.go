package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Change actions of an ApplyReport.
const (
	ActionCreated   = "created"
	ActionUpdated   = "updated"
	ActionUnchanged = "unchanged"
	// ActionStaged: StageCatalog stored a new version that is not active
	// (a gate evaluates it first); ActionNotStaged: an agent or tool the
	// tenant does not have yet, which only ApplyCatalog stores.
	ActionStaged    = "staged"
	ActionNotStaged = "not_staged"
)

// Change kinds of an ApplyReport.
const (
	KindTenant = "tenant"
	KindTool   = "tool"
	KindAgent  = "agent"
)

// Change is what applying a catalog did (or, in a dry run, would do) to one
// tenant, tool or agent.
type Change struct {
	Kind     string `json:"kind"` // tenant | tool | agent | rule | process
	TenantID string `json:"tenant_id"`
	Name     string `json:"name"` // tool name, agent id or process tag; the tenant id for tenants
	Action   string `json:"action"`
	// Version is the active version after the change (tools and agents),
	// or the latest (processes).
	Version int `json:"version,omitempty"`
	// Note says more about a change a reader should know of, e.g. that a
	// process's new catalog version supersedes patched versions.
	Note string `json:"note,omitempty"`
	// Source, for a tool, is the catalog entry it comes from when that is
	// not the tool's own: an MCP server's entry gives one tool per server
	// tool.
	Source string `json:"source,omitempty"`
}

// ApplyReport lists the changes of ApplyCatalog in document order: per
// tenant, the tenant itself, then its tools, its agents, its rules and
// its processes.
type ApplyReport struct {
	Changes []Change `json:"changes"`
}

// Changed reports whether anything was created or updated.
func (r ApplyReport) Changed() bool {
	for _, c := range r.Changes {
		if c.Action != ActionUnchanged {
			return true
		}
	}
	return false
}

// ApplyCatalog stores the catalog in one transaction: all of it or, on any
// error, nothing. A tool or agent gets a new version only when its canonical
// spec (an agent's with its tools resolved) differs from the active one, and
// the active pointer moves to it; so applying the same document again
// reports everything unchanged and writes nothing, which makes retries
// harmless. With dryRun the report is computed and the transaction rolled
// back.
//
// The catalog's content is checked where it is read: internal/catalog
// reports every problem of the files at once, by line. ApplyCatalog checks
// what needs the stored catalog and fails with agent.CodeInvalid when a
// tool an agent references, the default agent or a rule's agent is neither
// in the document nor stored for the tenant. It also refuses what it would
// store wrongly: an agent that names another tenant, and an agent's tool
// that is neither a reference (only a name) nor a spec with a kind.
func (s *Store) ApplyCatalog(ctx context.Context, c agent.Catalog, dryRun bool) (ApplyReport, error) {
	return s.applyCatalog(ctx, c, dryRun, false)
}

// StageCatalog stores a new version of each of the document's agents and
// tools that the tenant has and whose spec changed, without making it
// active: turns go on with the active versions while a gate evaluates the
// staged ones (an evaluation names a version). Nothing else of the
// document is stored — not the tenant's settings, rules or processes, nor
// agents and tools the tenant does not have yet (ActionNotStaged). An
// ApplyCatalog of the same document afterwards activates the staged
// versions rather than storing them again. Staging the same document
// twice stores nothing the second time.
func (s *Store) StageCatalog(ctx context.Context, c agent.Catalog) (ApplyReport, error) {
	return s.applyCatalog(ctx, c, false, true)
}

func (s *Store) applyCatalog(ctx context.Context, c agent.Catalog, dryRun, stage bool) (ApplyReport, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ApplyReport{}, fmt.Errorf("apply catalog: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit

	var report ApplyReport
	for _, tc := range c.Tenants {
		if stage {
			changes, err := stageTenant(ctx, tx, tc)
			if err != nil {
				return ApplyReport{}, err
			}
			report.Changes = append(report.Changes, changes...)
			continue
		}
		changes, err := applyTenant(ctx, tx, tc)
		if err != nil {
			return ApplyReport{}, err
		}
		if err := s.setRetention(ctx, tx, tc.TenantID, tc.Retention); err != nil {
			return ApplyReport{}, err
		}
		if err := s.setModelLimits(ctx, tx, tc, &changes[0]); err != nil {
			return ApplyReport{}, err
		}
		report.Changes = append(report.Changes, changes...)
	}
	if dryRun {
		// Deferred constraints are checked at commit; a dry run must not
		// report success for a document the real run would reject.
		if _, err := tx.Exec(ctx, sqlCheckConstraints); err != nil {
			return ApplyReport{}, fmt.Errorf("apply catalog: %w", err)
		}
		return report, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return ApplyReport{}, fmt.Errorf("apply catalog: commit: %w", err)
	}
	return report, nil
}

const sqlCheckConstraints = `SET CONSTRAINTS ALL IMMEDIATE`

// isToolRef reports whether t only names a tool, to be resolved against the
// document and the stored catalog.
func isToolRef(t agent.Tool) bool {
	return t.Kind == "" && t.Description == "" && len(t.Parameters) == 0 && t.Approval == "" && len(t.Config) == 0
}

const (
	// Serialises catalog writes per tenant, so that concurrent applies
	// cannot both pick the same next version.
	sqlLockTenantCatalog = `SELECT pg_advisory_xact_lock(hashtextextended('agentflow.catalog/' || $1, 0))`

	sqlInsertTenant = `INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING`

	sqlTenantDefault = `SELECT default_agent FROM tenants WHERE tenant_id = $1`

	sqlSetTenantDefault = `UPDATE tenants SET default_agent = $2, updated_at = now() WHERE tenant_id = $1`
	// Only a different allowlist is a change.
	sqlSetTenantEgress = `UPDATE tenants SET egress = to_jsonb($2::text[]), updated_at = now()
WHERE tenant_id = $1 AND egress IS DISTINCT FROM to_jsonb($2::text[])`

	// Only a different price table or budget is a change.
	sqlSetTenantPrices = `UPDATE tenants SET prices = $2::jsonb, updated_at = now()
WHERE tenant_id = $1 AND prices IS DISTINCT FROM $2::jsonb`
	// The tenant's own model limits share the column (modellimits.go):
	// new budgets keep them.
	sqlSetTenantBudgets = `
UPDATE tenants t SET budgets = v.b, updated_at = now()
FROM (SELECT $2::jsonb || jsonb_strip_nulls(jsonb_build_object('model_limits', budgets->'model_limits')) AS b
      FROM tenants WHERE tenant_id = $1) v
WHERE t.tenant_id = $1 AND t.budgets IS DISTINCT FROM v.b`
	sqlSetTenantPII = `UPDATE tenants SET pii = $2::jsonb, updated_at = now()
WHERE tenant_id = $1 AND pii IS DISTINCT FROM $2::jsonb`

	sqlAgentExists = `SELECT EXISTS (SELECT 1 FROM agents WHERE tenant_id = $1 AND agent_id = $2)`

	sqlActiveToolSpec = `
SELECT v.spec
FROM tools t
JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.active_version
WHERE t.tenant_id = $1 AND t.name = $2`
)

func applyTenant(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog) ([]Change, error) {
	if _, err := tx.Exec(ctx, sqlLockTenantCatalog, tc.TenantID); err != nil {
		return nil, fmt.Errorf("tenant %q: lock catalog: %w", tc.TenantID, err)
	}
	tag, err := tx.Exec(ctx, sqlInsertTenant, tc.TenantID)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: store tenant: %w", tc.TenantID, err)
	}
	tenantChange := Change{Kind: KindTenant, TenantID: tc.TenantID, Name: tc.TenantID, Action: ActionUnchanged}
	if tag.RowsAffected() == 1 {
		tenantChange.Action = ActionCreated
	}
	changes := []Change{tenantChange}

	entries, docAgents, err := putEntries(ctx, tx, tc, putVersion)
	if err != nil {
		return nil, err
	}
	changes = append(changes, entries...)

	if tc.DefaultAgent != "" {
		if !docAgents[tc.DefaultAgent] {
			var exists bool
			if err := tx.QueryRow(ctx, sqlAgentExists, tc.TenantID, tc.DefaultAgent).Scan(&exists); err != nil {
				return nil, fmt.Errorf("tenant %q: look up default agent: %w", tc.TenantID, err)
			}
			if !exists {
				return nil, agent.Errorf(agent.CodeInvalid, "tenant %q: default_agent %q is not one of its agents", tc.TenantID, tc.DefaultAgent)
			}
		}
		var current *string
		if err := tx.QueryRow(ctx, sqlTenantDefault, tc.TenantID).Scan(&current); err != nil {
			return nil, fmt.Errorf("tenant %q: read default agent: %w", tc.TenantID, err)
		}
		if current == nil || *current != tc.DefaultAgent {
			if _, err := tx.Exec(ctx, sqlSetTenantDefault, tc.TenantID, tc.DefaultAgent); err != nil {
				return nil, fmt.Errorf("tenant %q: set default agent: %w", tc.TenantID, err)
			}
			if changes[0].Action == ActionUnchanged {
				changes[0].Action = ActionUpdated
			}
		}
	}
	if tc.ReplaceEgress {
		egress := tc.Egress
		if egress == nil {
			egress = []string{}
		}
		tag, err := tx.Exec(ctx, sqlSetTenantEgress, tc.TenantID, egress)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: set egress: %w", tc.TenantID, err)
		}
		if tag.RowsAffected() == 1 && changes[0].Action == ActionUnchanged {
			changes[0].Action = ActionUpdated
		}
	}
	if tc.ReplacePII {
		var pii []byte
		if len(tc.PII) > 0 && string(tc.PII) != "null" {
			pii = tc.PII
		}
		tag, err := tx.Exec(ctx, sqlSetTenantPII, tc.TenantID, pii)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: set pii: %w", tc.TenantID, err)
		}
		if tag.RowsAffected() == 1 && changes[0].Action == ActionUnchanged {
			changes[0].Action = ActionUpdated
		}
	}
	if tc.PromoteAfter != nil {
		tag, err := tx.Exec(ctx, sqlSetPromoteAfter, tc.TenantID, *tc.PromoteAfter)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: set promote_after: %w", tc.TenantID, err)
		}
		if tag.RowsAffected() == 1 && changes[0].Action == ActionUnchanged {
			changes[0].Action = ActionUpdated
		}
	}
	if err := applyBilling(ctx, tx, tc, &changes[0]); err != nil {
		return nil, err
	}
	if tc.ReplaceRules {
		ruleChanges, err := applyRules(ctx, tx, tc, docAgents)
		if err != nil {
			return nil, err
		}
		changes = append(changes, ruleChanges...)
	}
	processChanges, err := applyProcesses(ctx, tx, tc)
	if err != nil {
		return nil, err
	}
	changes = append(changes, processChanges...)
	if err := bumpIfChanged(ctx, tx, tc.TenantID, changes); err != nil {
		return nil, err
	}
	return changes, nil
}

// stageTenant stores the new versions of a tenant's agents and tools
// that exist, without activating them (StageCatalog).
func stageTenant(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog) ([]Change, error) {
	if _, err := tx.Exec(ctx, sqlLockTenantCatalog, tc.TenantID); err != nil {
		return nil, fmt.Errorf("tenant %q: lock catalog: %w", tc.TenantID, err)
	}
	changes, _, err := putEntries(ctx, tx, tc, stageVersion)
	if err != nil {
		return nil, err
	}
	// The tenant's own settings are not staged: unchanged, and first, as
	// ApplyCatalog reports them.
	return append([]Change{{Kind: KindTenant, TenantID: tc.TenantID, Name: tc.TenantID, Action: ActionUnchanged}}, changes...), nil
}

// putVersionFunc stores a version of a tool or an agent (putVersion,
// stageVersion).
type putVersionFunc func(ctx context.Context, tx pgx.Tx, q versioned, tenantID, name string, spec []byte, hash string) (string, int, error)

// putEntries stores the tenant's tools, then its agents with their tools
// resolved, by put; it returns their changes and the agents stored.
func putEntries(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, put putVersionFunc) ([]Change, map[string]bool, error) {
	var changes []Change
	docTools := make(map[string]agent.Tool, len(tc.Tools))
	for _, t := range tc.Tools {
		t.Version, t.SpecHash = 0, "" // a version names a spec; the spec does not name its own
		spec, hash, err := canonicalJSON(t)
		if err != nil {
			return nil, nil, fmt.Errorf("tenant %q: tool %q: %w", tc.TenantID, t.Name, err)
		}
		action, version, err := put(ctx, tx, toolVersions, tc.TenantID, t.Name, spec, hash)
		if err != nil {
			return nil, nil, fmt.Errorf("tenant %q: tool %q: %w", tc.TenantID, t.Name, err)
		}
		changes = append(changes, Change{Kind: KindTool, TenantID: tc.TenantID, Name: t.Name, Action: action, Version: version, Source: t.Source})
		docTools[t.Name] = t
	}
	docAgents := make(map[string]bool, len(tc.Agents))
	for _, a := range tc.Agents {
		if a.TenantID != "" && a.TenantID != tc.TenantID {
			// Rows are written under tc.TenantID; never into another tenant.
			return nil, nil, agent.Errorf(agent.CodeInvalid, "tenant %q: agent %q: tenant_id %q differs from its catalog's", tc.TenantID, a.ID, a.TenantID)
		}
		resolved, err := resolveTools(ctx, tx, tc.TenantID, a, docTools)
		if err != nil {
			return nil, nil, err
		}
		if a.Composites {
			if resolved, err = grantComposites(ctx, tx, tc.TenantID, resolved); err != nil {
				return nil, nil, fmt.Errorf("tenant %q: agent %q: %w", tc.TenantID, a.ID, err)
			}
		}
		if err := versionTools(ctx, tx, tc.TenantID, resolved); err != nil {
			return nil, nil, fmt.Errorf("tenant %q: agent %q: %w", tc.TenantID, a.ID, err)
		}
		a.TenantID, a.Version, a.Tools = tc.TenantID, 0, resolved
		spec, hash, err := canonicalJSON(a)
		if err != nil {
			return nil, nil, fmt.Errorf("tenant %q: agent %q: %w", tc.TenantID, a.ID, err)
		}
		action, version, err := put(ctx, tx, agentVersions, tc.TenantID, a.ID, spec, hash)
		if err != nil {
			return nil, nil, fmt.Errorf("tenant %q: agent %q: %w", tc.TenantID, a.ID, err)
		}
		ch := Change{Kind: KindAgent, TenantID: tc.TenantID, Name: a.ID, Action: action, Version: version}
		if action != ActionUnchanged && action != ActionNotStaged {
			ch.Note = strictNote(a)
		}
		changes = append(changes, ch)
		docAgents[a.ID] = true
	}
	return changes, docAgents, nil
}

// resolveTools replaces an agent's tool references by full specs: from the
// document first, else the tenant's stored active version.
func resolveTools(ctx context.Context, tx pgx.Tx, tenantID string, a agent.Agent, docTools map[string]agent.Tool) ([]agent.Tool, error) {
	if len(a.Tools) == 0 {
		return nil, nil
	}
	out := make([]agent.Tool, 0, len(a.Tools))
	for _, t := range a.Tools {
		switch {
		case t.Kind != "":
			out = append(out, t)
			continue
		case !isToolRef(t):
			return nil, agent.Errorf(agent.CodeInvalid, "tenant %q: agent %q: tool %q: a tool reference has only a name; an inline tool needs a kind", tenantID, a.ID, t.Name)
		}
		if dt, ok := docTools[t.Name]; ok {
			out = append(out, dt)
			continue
		}
		var spec []byte
		err := tx.QueryRow(ctx, sqlActiveToolSpec, tenantID, t.Name).Scan(&spec)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, agent.Errorf(agent.CodeInvalid, "tenant %q: agent %q: unknown tool %q", tenantID, a.ID, t.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("tenant %q: agent %q: load tool %q: %w", tenantID, a.ID, t.Name, err)
		}
		var st agent.Tool
		if err := json.Unmarshal(spec, &st); err != nil {
			return nil, fmt.Errorf("tenant %q: agent %q: decode tool %q: %w", tenantID, a.ID, t.Name, err)
		}
		out = append(out, st)
	}
	return out, nil
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

const (
	sqlActiveAgent = `
SELECT v.version, v.spec
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1 AND a.agent_id = $2`

	sqlAgentVersion = `
SELECT version, spec FROM agent_versions
WHERE tenant_id = $1 AND agent_id = $2 AND version = $3`

	sqlListAgents = `
SELECT v.version, v.spec
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1
ORDER BY a.agent_id`
)

// ActiveAgent returns the active version of an agent; agent.CodeNotFound
// when the tenant has no such agent.
func (s *Store) ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error) {
	if err := requireAgentKey(tenantID, agentID); err != nil {
		return agent.Agent{}, err
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, sqlActiveAgent, tenantID, agentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.Agent{}, agent.Errorf(agent.CodeNotFound, "agent %q of tenant %q not found", agentID, tenantID)
	}
	if err != nil {
		return agent.Agent{}, fmt.Errorf("load agent %q: %w", agentID, err)
	}
	return a, nil
}

// AgentVersion returns one version of an agent, as pinned by a turn;
// agent.CodeNotFound when it does not exist.
func (s *Store) AgentVersion(ctx context.Context, tenantID, agentID string, version int) (agent.Agent, error) {
	if err := requireAgentKey(tenantID, agentID); err != nil {
		return agent.Agent{}, err
	}
	if version <= 0 {
		return agent.Agent{}, agent.Errorf(agent.CodeInvalid, "agent version must be positive, got %d", version)
	}
	key := versionKey{tenantID, agentID, version}
	if a, ok := s.versions.get(key); ok {
		return a, nil
	}
	a, err := s.versions.load(ctx, key, func(ctx context.Context) (agent.Agent, error) {
		a, err := scanAgent(s.pool.QueryRow(ctx, sqlAgentVersion, tenantID, agentID, version))
		if errors.Is(err, pgx.ErrNoRows) {
			return agent.Agent{}, agent.Errorf(agent.CodeNotFound, "version %d of agent %q of tenant %q not found", version, agentID, tenantID)
		}
		if err != nil {
			return agent.Agent{}, fmt.Errorf("load agent %q version %d: %w", agentID, version, err)
		}
		return a, nil
	})
	if err != nil {
		return agent.Agent{}, err
	}
	return clipped(a), nil
}

// DefaultAgent returns the id of the tenant's default agent;
// agent.CodeNotFound when the tenant is unknown or has none.
func (s *Store) DefaultAgent(ctx context.Context, tenantID string) (string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return "", err
	}
	var id *string
	err := s.pool.QueryRow(ctx, sqlTenantDefault, tenantID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", agent.Errorf(agent.CodeNotFound, "tenant %q not found", tenantID)
	}
	if err != nil {
		return "", fmt.Errorf("load default agent of tenant %q: %w", tenantID, err)
	}
	if id == nil {
		return "", agent.Errorf(agent.CodeNotFound, "tenant %q has no default agent", tenantID)
	}
	return *id, nil
}

// ListAgents returns the active version of each of the tenant's agents,
// sorted by id; none for an unknown tenant.
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]agent.Agent, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	agents, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.Agent, error) { return scanAgent(row) }, sqlListAgents, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list agents of tenant %q: %w", tenantID, err)
	}
	return agents, nil
}

func requireAgentKey(tenantID, agentID string) error {
	if err := requireID("tenant_id", tenantID); err != nil {
		return err
	}
	return requireID("agent_id", agentID)
}

// scanAgent reads (version, spec). The spec was stored with version 0 so
// that its hash compares content only.
func scanAgent(row pgx.Row) (agent.Agent, error) {
	var version int
	var spec []byte
	if err := row.Scan(&version, &spec); err != nil {
		return agent.Agent{}, err
	}
	var a agent.Agent
	if err := json.Unmarshal(spec, &a); err != nil {
		return agent.Agent{}, fmt.Errorf("decode spec: %w", err)
	}
	a.Version = version
	return a, nil
}
