package activities

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// RecordApproval stores a decision on a tool call (who, when, why). The
// first record of a call stands, so a retry is harmless.
func (a *Activities) RecordApproval(ctx context.Context, r agent.ApprovalRecord) error {
	if err := a.store.RecordApproval(ctx, r); err != nil {
		return fmt.Errorf("record approval of call %q: %w", r.CallID, err)
	}
	return nil
}

// approvals applies the agent's tools' approval policies to the calls,
// with the grants that decide calls in a person's stead
// (approval.Gate.Needs). Grants that cannot be read decide nothing: the
// calls wait for a person.
func (a *Activities) approvals(ctx context.Context, ag agent.Agent, in contract.CallModelInput, calls []agent.ToolCall) []contract.ApprovalNeed {
	needs, err := a.gate.Needs(ctx, ag, in, calls)
	if err != nil {
		a.log(ctx).Warn("grants not read; the calls wait for a person", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID), zap.Error(err))
	}
	return needs
}
