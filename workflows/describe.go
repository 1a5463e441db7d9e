package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// describeTimeout bounds the team's worker's answer: a catalog apply
// waits for it.
const describeTimeout = 20 * time.Second

// DescribeTools runs the agentflow.tools activity on the team's task
// queue (any SDK's worker may serve it) and returns what it publishes.
// A client cannot run an activity by itself; this workflow is how a
// catalog apply asks, and it leaves the question in the Web UI.
func DescribeTools(ctx workflow.Context, in contract.DescribeToolsInput) (agent.PublishedTools, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              in.TaskQueue,
		ScheduleToCloseTimeout: describeTimeout,
		StartToCloseTimeout:    5 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out agent.PublishedTools
	err := workflow.ExecuteActivity(ctx, agent.PublishedToolsActivity).Get(ctx, &out)
	return out, err
}
