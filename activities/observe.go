package activities

import (
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// ObserveEvents hands an ended turn's log to the worker's Event hooks,
// each event once per attempt, in order: read with the events query, as
// every door reads it, so that hooks see exactly what callers are shown.
// The turn runs it only when LoadAgent found Event hooks
// (contract.LoadAgentResult.ObserveEvents), after its terminal event.
func (a *Activities) ObserveEvents(ctx context.Context, in contract.ObserveEventsInput) error {
	if !a.hooks.Events() {
		return nil // a worker without them took the call
	}
	for after := int64(0); ; {
		page, err := turnclient.Events(ctx, a.temporal, in.WorkflowID, agent.EventsQuery{AfterIndex: after})
		if err != nil {
			return fmt.Errorf("read the events of job %q: %w", in.JobID, err)
		}
		for _, e := range page.Events {
			a.hooks.Event(ctx, &hooks.TurnEvent{TenantID: in.TenantID, AgentID: in.AgentID, JobID: in.JobID, Event: e})
			after = e.Index
		}
		if len(page.Events) == 0 || after+1 >= page.Next {
			return nil
		}
	}
}
