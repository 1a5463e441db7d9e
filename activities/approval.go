package activities

import (
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// RecordApproval stores a decision on a tool call (who, when, why). The
// first record of a call stands, so a retry is harmless.
func (a *Activities) RecordApproval(ctx context.Context, r agent.ApprovalRecord) error {
	if err := a.store.RecordApproval(ctx, r); err != nil {
		return fmt.Errorf("record approval of call %q: %w", r.CallID, err)
	}
	return nil
}
