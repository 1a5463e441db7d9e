package tenant

import (
	"context"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

// ResolveEnvOf returns, for catalog.Resolve, the env of a tenant whose
// catalog st is about to apply: HTTP under the egress allowlist the catalog
// sets, or else the stored one (none for a new tenant), within what the
// operator's policy op allows (nil: the default policy).
func ResolveEnvOf(ctx context.Context, st *store.Store, op *egress.Operator, allowUnreachable bool) func(agent.TenantCatalog) (tools.ResolveEnv, error) {
	return func(tc agent.TenantCatalog) (tools.ResolveEnv, error) {
		entries := tc.Egress
		if !tc.ReplaceEgress {
			r, err := st.TenantSettings(ctx, tc.TenantID)
			switch {
			case agent.IsCode(err, agent.CodeNotFound):
			case err != nil:
				return tools.ResolveEnv{}, err
			default:
				entries = r.Egress
			}
		}
		policy, err := egress.ParsePolicy(entries)
		if err != nil {
			return tools.ResolveEnv{}, agent.WithCode(agent.CodeInvalid, err)
		}
		policy.Tenant = tc.TenantID
		return tools.ResolveEnv{TenantID: tc.TenantID, HTTP: op.Client(policy), AllowUnreachable: allowUnreachable}, nil
	}
}
