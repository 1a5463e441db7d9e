package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// workflowToolCatalog names the team's workflow on queue QUEUE.
const workflowToolCatalog = `
tenant: demo
default_agent: clerk
tools:
  - name: refund
    kind: workflow
    description: Ask the refunds desk to refund an order; it answers when a person has decided.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    approval: never
    timeout_sec: 600
    config: {task_queue: QUEUE, workflow_type: AwaitRefund}
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [refund]
    limits: {max_iterations: 4, turn_timeout_sec: 900}
`

const workflowToolScript = `
rules:
  - name: refund
    when: {user: '(?i)refund order (\w+)'}
    reply: {tool_calls: [{name: refund, arguments: '{"order_id": "$1"}'}]}
  - name: answer
    when: {tool: '(?s)^(refund .+)$'}
    reply: {text: 'The desk said: $1'}
`

// TestWorkflowTool: a catalog entry of kind workflow makes the turn start
// the team's workflow as its child, on the team's queue, under an id of
// the call's; the turn waits while the child waits for a person (a
// signal), the child is told who asked, and what it returns is the
// tool's result. Cancelling a turn cancels the child it waits on.
func TestWorkflowTool(t *testing.T) {
	queue := "refunds-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+workflow:AwaitRefund")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: workflowToolScript, TemporalAllow: allow,
		Catalogs: []string{strings.ReplaceAll(workflowToolCatalog, "QUEUE", queue)}})

	// The team's worker: a workflow that waits for the desk's decision.
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		ContextPropagators: []workflow.ContextPropagator{agentflow.AskedPropagator()}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		who, ok := agentflow.WhoAskedWorkflow(ctx)
		if !ok {
			return "", temporal.NewNonRetryableApplicationError("no one asked", "Anonymous", nil)
		}
		var decision string
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(workflow.GetSignalChannel(ctx, "decide"), func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &decision) })
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		if sel.Select(ctx); ctx.Err() != nil {
			return "", ctx.Err() // the turn was cancelled: so is the refund
		}
		return "refund " + in.OrderID + " " + decision + " for " + who.TenantID + " (" + who.Key + ")", nil
	}, workflow.RegisterOptions{Name: "AwaitRefund"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(order string) (client.WorkflowRun, string) {
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", JobID: "refund-" + testserver.RandomID(), Prompt: "Refund order " + order + "."})
		require.NoError(t, err)
		var child string
		require.Eventually(t, func() bool {
			d, err := srv.Client().DescribeWorkflowExecution(ctx, run.GetID(), "")
			if err != nil || len(d.GetPendingChildren()) != 1 {
				return false
			}
			child = d.GetPendingChildren()[0].GetWorkflowId()
			return true
		}, time.Minute, 100*time.Millisecond, "the turn starts the team's workflow as its child")
		require.True(t, strings.HasPrefix(child, run.GetID()+"/tool/"), child)
		return run, child
	}

	run, child := start("A17")
	require.NoError(t, srv.Client().SignalWorkflow(ctx, child, "", "decide", "approved"))
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Contains(t, res.Output, "The desk said: refund A17 approved for demo (")
	require.Contains(t, res.Output, res.JobID+":tool:", "the child is told the call's key")
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	(&env{Server: srv, t: t}).replay(run.GetID(), "turn_workflow_tool")

	run, child = start("B2")
	require.NoError(t, srv.Client().SignalWorkflow(ctx, run.GetID(), "", contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "test"}))
	res, err = turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Eventually(t, func() bool {
		d, err := srv.Client().DescribeWorkflowExecution(ctx, child, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, time.Minute, 100*time.Millisecond, "the child is cancelled with its turn")
}
