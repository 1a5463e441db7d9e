package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

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
	return slices.ContainsFunc(r.Changes, func(c Change) bool { return c.Action != ActionUnchanged })
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

// applyTenant stores one tenant of a catalog (ApplyCatalog) and returns
// its changes, the tenant's own first.
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
		if err := setDefaultAgent(ctx, tx, tc, docAgents, &changes[0]); err != nil {
			return nil, err
		}
	}
	if err := applySettings(ctx, tx, tc, &changes[0]); err != nil {
		return nil, err
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

// setDefaultAgent sets the tenant's default agent, one of the document's
// agents or of those stored; a different one marks the tenant updated.
func setDefaultAgent(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, docAgents map[string]bool, change *Change) error {
	if !docAgents[tc.DefaultAgent] {
		var exists bool
		if err := tx.QueryRow(ctx, sqlAgentExists, tc.TenantID, tc.DefaultAgent).Scan(&exists); err != nil {
			return fmt.Errorf("tenant %q: look up default agent: %w", tc.TenantID, err)
		}
		if !exists {
			return agent.Errorf(agent.CodeInvalid, "tenant %q: default_agent %q is not one of its agents", tc.TenantID, tc.DefaultAgent)
		}
	}
	var current *string
	if err := tx.QueryRow(ctx, sqlTenantDefault, tc.TenantID).Scan(&current); err != nil {
		return fmt.Errorf("tenant %q: read default agent: %w", tc.TenantID, err)
	}
	if current == nil || *current != tc.DefaultAgent {
		if _, err := tx.Exec(ctx, sqlSetTenantDefault, tc.TenantID, tc.DefaultAgent); err != nil {
			return fmt.Errorf("tenant %q: set default agent: %w", tc.TenantID, err)
		}
		if change.Action == ActionUnchanged {
			change.Action = ActionUpdated
		}
	}
	return nil
}

// applySettings stores the tenant's egress allowlist, PII redaction and
// promote_after when the catalog gives them; a different value marks the
// tenant updated.
func applySettings(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, change *Change) error {
	if tc.ReplaceEgress {
		egress := tc.Egress
		if egress == nil {
			egress = []string{}
		}
		if err := setTenant(ctx, tx, change, sqlSetTenantEgress, tc.TenantID, "egress", egress); err != nil {
			return err
		}
	}
	if tc.ReplacePII {
		var pii []byte
		if len(tc.PII) > 0 && string(tc.PII) != "null" {
			pii = tc.PII
		}
		if err := setTenant(ctx, tx, change, sqlSetTenantPII, tc.TenantID, "pii", pii); err != nil {
			return err
		}
	}
	if tc.PromoteAfter != nil {
		return setTenant(ctx, tx, change, sqlSetPromoteAfter, tc.TenantID, "promote_after", *tc.PromoteAfter)
	}
	return nil
}

// setTenant runs sql, which sets the tenant's what to v; a row changed
// marks the tenant updated.
func setTenant(ctx context.Context, tx pgx.Tx, change *Change, sql, tenantID, what string, v any) error {
	tag, err := tx.Exec(ctx, sql, tenantID, v)
	if err != nil {
		return fmt.Errorf("tenant %q: set %s: %w", tenantID, what, err)
	}
	if tag.RowsAffected() == 1 && change.Action == ActionUnchanged {
		change.Action = ActionUpdated
	}
	return nil
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

// putEntries stores the tenant's tools, then its agents with their tools
// resolved, by put; it returns their changes and the agents stored.
func putEntries(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, put putVersionFunc) ([]Change, map[string]bool, error) {
	var changes []Change
	docTools := make(map[string]agent.Tool, len(tc.Tools))
	for _, t := range tc.Tools {
		t.Version, t.SpecHash = 0, "" // a version names a spec; the spec does not name its own
		action, version, err := putSpec(ctx, tx, put, toolVersions, tc.TenantID, t.Name, t)
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
		action, version, err := putSpec(ctx, tx, put, agentVersions, tc.TenantID, a.ID, a)
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
		if err := oneRow(err, agent.Errorf(agent.CodeInvalid, "tenant %q: agent %q: unknown tool %q", tenantID, a.ID, t.Name),
			"tenant %q: agent %q: load tool %q", tenantID, a.ID, t.Name); err != nil {
			return nil, err
		}
		var st agent.Tool
		if err := json.Unmarshal(spec, &st); err != nil {
			return nil, fmt.Errorf("tenant %q: agent %q: decode tool %q: %w", tenantID, a.ID, t.Name, err)
		}
		out = append(out, st)
	}
	return out, nil
}
