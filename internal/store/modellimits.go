package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// A tenant's own model limits (agent.TenantCatalog.ModelLimits) are kept
// under the key model_limits of its budgets column, beside the budgets
// that bound its spend: setting one leaves the other as it was.
const (
	sqlSetTenantModelLimits = `
UPDATE tenants t SET budgets = v.b, updated_at = now()
FROM (SELECT (COALESCE(budgets, '{}') - 'model_limits') || jsonb_strip_nulls(jsonb_build_object('model_limits', $2::jsonb)) AS b
      FROM tenants WHERE tenant_id = $1) v
WHERE t.tenant_id = $1 AND t.budgets IS DISTINCT FROM v.b`
)

// setModelLimits stores a tenant's own model limits from its catalog,
// refused, naming the field, where one lets more calls through than the
// operator's limits of its key (Options.ModelLimits).
func (s *Store) setModelLimits(ctx context.Context, tx pgx.Tx, tc agent.TenantCatalog, change *Change) error {
	if !tc.ReplaceModelLimits {
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(tc.ModelLimits)) {
		_, op, ok := agent.ModelLimitsFor(s.modelLimits, key)
		if !ok {
			continue // the operator does not govern the key: any limit narrows none
		}
		if err := tc.ModelLimits[key].Narrows(op); err != nil {
			return agent.Errorf(agent.CodeInvalid, "tenant %q: model_limits.%s.%s", tc.TenantID, key, err.Error())
		}
	}
	var raw []byte // none removes the tenant's own: the operator's apply
	if len(tc.ModelLimits) > 0 {
		raw, _ = json.Marshal(tc.ModelLimits)
	}
	return setTenant(ctx, tx, change, sqlSetTenantModelLimits, tc.TenantID, "model_limits", raw)
}

// decodeModelLimits reads a tenant's own model limits from its budgets
// column.
func decodeModelLimits(tenantID string, budgets []byte) (map[string]agent.ModelLimits, error) {
	if len(budgets) == 0 {
		return nil, nil
	}
	var v struct {
		Limits map[string]agent.ModelLimits `json:"model_limits"`
	}
	if err := json.Unmarshal(budgets, &v); err != nil {
		return nil, fmt.Errorf("load model limits of tenant %q: %w", tenantID, err)
	}
	return v.Limits, nil
}
