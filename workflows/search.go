package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// searchAttrs sets the turn's search attributes once its agent is
// loaded: its tenant, agent, channel and session, which the Web UI and
// the API's lists filter on. It holds no state: a next run does not set
// them again.
type searchAttrs struct {
	t *turn // the core: its request and agent
}

func (s *searchAttrs) start(_ workflow.Context, t *turn, _ *contract.TurnCarry) error {
	s.t = t
	return nil
}

func (s *searchAttrs) carry(*contract.TurnCarry) error { return nil }

// loaded sets the turn's search attributes in one command, whatever the
// starter set: what a history shows of the start's attributes differs
// between servers, so the workflow must not branch on it.
func (s *searchAttrs) loaded(ctx workflow.Context) (*agent.TurnError, error) {
	t := s.t
	attrs := []temporal.SearchAttributeUpdate{contract.SearchTenant.ValueSet(t.req.TenantID), contract.SearchAgent.ValueSet(t.agent.ID),
		contract.SearchChannel.ValueSet(t.req.Channel)}
	if t.req.SessionID != "" {
		attrs = append(attrs, contract.SearchSession.ValueSet(t.req.SessionID))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		return nil, fmt.Errorf("set search attributes: %w", err)
	}
	return nil, nil
}
