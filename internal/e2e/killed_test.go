package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestApprovalSurvivesWorkerKill kills the worker process while a turn
// waits for approval; after a new worker starts, the approval resumes it.
func TestApprovalSurvivesWorkerKill(t *testing.T) {
	p := newProcEnv(t, testScript, careCatalog)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, queue := p.client, p.queue

	first := p.startWorker()
	req := agent.TurnRequest{TenantID: "care", JobID: "kill-" + testserver.RandomID(), Prompt: "What is 6 * 7?"}
	req.Normalize()
	run, err := c.ExecuteWorkflow(ctx, turnclient.StartOptions(queue, req), contract.AgentTurn, req)
	require.NoError(t, err)

	var pending []agent.PendingApproval
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, run.GetID(), "", contract.QueryPendingApprovals)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1
	}, 30*time.Second, 50*time.Millisecond)

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	p.startWorker()

	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: contract.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{agent.ApprovalDecision{CallID: pending[0].CallID, Approved: true, Approver: "ana"}},
	})
	require.NoError(t, err)
	var ack contract.ApprovalAck
	require.NoError(t, h.Get(ctx, &ack))
	require.Equal(t, agent.ApprovalApproved, ack.Outcome)

	var res agent.TurnResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "The result is 42.", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
}
