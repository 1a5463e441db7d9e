package catalog

import (
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// prepare checks an agent's prepare phase (agent.ParsePrepare). Its
// collections are checked to be the tenant's when the catalog is applied
// (checkPrepare).
func (l *loader) prepare(d *agentDoc) *agent.Prepare {
	p := &d.Prepare
	if p.raw == nil || p.bad {
		return nil
	}
	out, err := agent.ParsePrepare(p.raw)
	if err != nil {
		l.addf(p.on(p.node), "%s", err.Error())
		return nil
	}
	return out
}

// checkPrepare says which of the tenant's agents retrieve, in their
// prepare phase, from a collection the tenant does not have (another
// tenant's is as unknown as a missing one).
func checkPrepare(ctx context.Context, k tools.Knowledge, tc *agent.TenantCatalog) []error {
	var problems []error
	for _, ag := range tc.Agents {
		if ag.Prepare == nil || ag.Prepare.Retrieve == nil {
			continue
		}
		if err := tools.CheckCollections(ctx, k, tc.TenantID, ag.Prepare.Retrieve.Collections); err != nil {
			problems = append(problems, fmt.Errorf("agent %q: prepare.retrieve: %w", ag.ID, err))
		}
	}
	return problems
}
