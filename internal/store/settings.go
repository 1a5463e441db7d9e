package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// CatalogChannel is the NOTIFY channel that names a tenant whose catalog
// changed.
const CatalogChannel = "agentflow_catalog"

// KindRule is the Change kind of routing rules.
const KindRule = "rule"

// ActionDeleted: a rule the document no longer has.
const ActionDeleted = "deleted"

// TenantSettings is what a tenant's turns need of its catalog, at one
// version: its routing rules and default agent, its egress allowlist, its
// billing and its PII settings (tenant.Cache builds its runtime settings
// from it).
type TenantSettings struct {
	TenantID     string
	Version      int64
	DefaultAgent string
	Rules        []agent.Rule // priority order: highest first, then by name
	Agents       int          // how many agents and tools the tenant has
	Tools        int
	// Egress is the tenant's egress allowlist (internal/egress entries).
	Egress []string
	// Billing is the tenant's prices and budgets.
	Billing Billing
	// PII is the tenant's PII redaction (internal/guard.Config as JSON;
	// nil: none).
	PII json.RawMessage
}

const (
	sqlRules = `
SELECT name, priority, condition, agent_id FROM routing_rules
WHERE tenant_id = $1 ORDER BY priority DESC, name`
	sqlTenantSettings = `
SELECT catalog_version, coalesce(default_agent, ''),
       (SELECT count(*) FROM agents a WHERE a.tenant_id = t.tenant_id),
       (SELECT count(*) FROM tools o WHERE o.tenant_id = t.tenant_id),
       egress, prices, budgets, pii
FROM tenants t WHERE tenant_id = $1`
	sqlUpsertRule = `
INSERT INTO routing_rules (tenant_id, name, priority, condition, agent_id) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, name) DO UPDATE
SET priority = EXCLUDED.priority, condition = EXCLUDED.condition, agent_id = EXCLUDED.agent_id, updated_at = now()`
	sqlDeleteRule   = `DELETE FROM routing_rules WHERE tenant_id = $1 AND name = $2`
	sqlBumpCatalog  = `UPDATE tenants SET catalog_version = catalog_version + 1, updated_at = now() WHERE tenant_id = $1`
	sqlNotifyTenant = `SELECT pg_notify('` + CatalogChannel + `', $1)`
)

// TenantSettings returns a tenant's rules, default agent, catalog version,
// egress allowlist, billing and PII settings, read in one snapshot. An
// unknown tenant is agent.CodeNotFound.
func (s *Store) TenantSettings(ctx context.Context, tenantID string) (TenantSettings, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return TenantSettings{}, err
	}
	r := TenantSettings{TenantID: tenantID}
	var prices, budgets []byte
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlTenantSettings, tenantID).Scan(&r.Version, &r.DefaultAgent, &r.Agents, &r.Tools, &r.Egress, &prices, &budgets, &r.PII); err != nil {
			return err
		}
		var err error
		r.Rules, err = readRules(ctx, tx, tenantID)
		return err
	})
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "tenant %q not found", tenantID), "load routing of tenant %q", tenantID); err != nil {
		return TenantSettings{}, err
	}
	if r.Billing, err = decodeBilling(tenantID, prices, budgets); err != nil {
		return TenantSettings{}, err
	}
	return r, nil
}

func readRules(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, tenantID string) ([]agent.Rule, error) {
	rows, err := q.Query(ctx, sqlRules, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (agent.Rule, error) {
		var r agent.Rule
		err := row.Scan(&r.Name, &r.Priority, &r.Condition, &r.AgentID)
		return r, err
	})
}

// applyRules makes the tenant's rules those of the document.
func applyRules(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, docAgents map[string]bool) ([]Change, error) {
	current, err := readRules(ctx, tx, tc.TenantID)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: read rules: %w", tc.TenantID, err)
	}
	byName := make(map[string]agent.Rule, len(current))
	for _, r := range current {
		byName[r.Name] = r
	}
	var changes []Change
	keep := map[string]bool{}
	for _, r := range tc.Rules {
		keep[r.Name] = true
		if !docAgents[r.AgentID] {
			var exists bool
			if err := tx.QueryRow(ctx, sqlAgentExists, tc.TenantID, r.AgentID).Scan(&exists); err != nil {
				return nil, fmt.Errorf("tenant %q: look up agent of rule %q: %w", tc.TenantID, r.Name, err)
			}
			if !exists {
				return nil, agent.Errorf(agent.CodeInvalid, "tenant %q: rule %q names agent %q, which is not one of its agents", tc.TenantID, r.Name, r.AgentID)
			}
		}
		action := ActionCreated
		if old, ok := byName[r.Name]; ok {
			action = ActionUnchanged
			if old != r {
				action = ActionUpdated
			}
		}
		if action != ActionUnchanged {
			if _, err := tx.Exec(ctx, sqlUpsertRule, tc.TenantID, r.Name, r.Priority, r.Condition, r.AgentID); err != nil {
				return nil, fmt.Errorf("tenant %q: store rule %q: %w", tc.TenantID, r.Name, err)
			}
		}
		changes = append(changes, Change{Kind: KindRule, TenantID: tc.TenantID, Name: r.Name, Action: action})
	}
	for _, r := range current {
		if keep[r.Name] {
			continue
		}
		if _, err := tx.Exec(ctx, sqlDeleteRule, tc.TenantID, r.Name); err != nil {
			return nil, fmt.Errorf("tenant %q: delete rule %q: %w", tc.TenantID, r.Name, err)
		}
		changes = append(changes, Change{Kind: KindRule, TenantID: tc.TenantID, Name: r.Name, Action: ActionDeleted})
	}
	return changes, nil
}

// bumpIfChanged advances the tenant's catalog version and tells listeners
// (delivered at commit) when any of changes changed something.
func bumpIfChanged(ctx context.Context, tx pgx.Tx, tenantID string, changes []Change) error {
	for _, c := range changes {
		if c.Action != ActionUnchanged {
			if _, err := tx.Exec(ctx, sqlBumpCatalog, tenantID); err != nil {
				return fmt.Errorf("tenant %q: bump catalog version: %w", tenantID, err)
			}
			if _, err := tx.Exec(ctx, sqlNotifyTenant, tenantID); err != nil {
				return fmt.Errorf("tenant %q: notify catalog change: %w", tenantID, err)
			}
			return nil
		}
	}
	return nil
}
