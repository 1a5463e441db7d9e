package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// MemoryExtract keeps the durable facts of a conversation about its user
// as long-term memories (contract.MemoryExtract): one ExtractMemories
// activity, which asks the agent's summary model and stores what it
// finds, all or nothing. Its id names the session and the transcript's
// position, so a position is extracted once; the activity does nothing
// when that position's memories are stored already, so a retry after
// they were stored asks no model again.
func MemoryExtract(ctx workflow.Context, in contract.MemoryExtractInput) (contract.ExtractMemoriesResult, error) {
	if in.TenantID == "" || in.SessionID == "" {
		return contract.ExtractMemoriesResult{}, contract.Failure(agent.Errorf(agent.CodeInvalid, "tenant_id and session_id are required"))
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		Summary:             "extract the conversation's durable facts",
	})
	var res contract.ExtractMemoriesResult
	err := workflow.ExecuteActivity(ctx, contract.ExtractMemories, in).Get(ctx, &res)
	return res, err
}
