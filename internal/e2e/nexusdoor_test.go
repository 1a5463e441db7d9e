package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// callers is the namespace of the process teams' workflows that call
// agents through a Nexus endpoint: not agentflow's.
const callers = "teams"

// TestAgentsNexusService: a workflow in another namespace runs a turn
// through the endpoint the operator bound to tenant care, and gets its
// result; the turn is the binding's tenant's, its caller the endpoint's.
// An input naming a tenant is refused, saying why. Cancelling the
// operation cancels the turn, which ends canceled.
func TestAgentsNexusService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	endpoint := "agents-" + id
	srv := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{careCatalog},
		NexusBindings: []nexusdoor.Binding{{TaskQueue: endpoint, TenantID: "care", Roles: []string{"user", "approver"}, Name: "billing-process"}}})
	require.NoError(t, devstack.EnsureNamespace(ctx, srv.Address, callers))
	require.NoError(t, devstack.EnsureNexusEndpoint(ctx, srv.Client(), devstack.NexusEndpoint{Name: endpoint, Namespace: srv.Namespace, TaskQueue: endpoint}))

	// The billing team's workflows, in their own namespace.
	run := func(ctx workflow.Context, in agentflow.RunTurnInput) (agentflow.TurnResult, error) {
		var res agentflow.TurnResult
		err := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, agentflow.RunTurn, in, workflow.NexusOperationOptions{}).Get(ctx, &res)
		return res, err
	}
	forged := func(ctx workflow.Context, in map[string]any) (agentflow.TurnResult, error) {
		var res agentflow.TurnResult
		err := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, nexusdoor.OpRunTurn, in, workflow.NexusOperationOptions{}).Get(ctx, &res)
		return res, err
	}
	cc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: callers})
	require.NoError(t, err)
	t.Cleanup(cc.Close)
	queue := "billing-" + id
	w := worker.New(cc, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(run, workflow.RegisterOptions{Name: "RunAgentTurn"})
	w.RegisterWorkflowWithOptions(forged, workflow.RegisterOptions{Name: "RunForgedTurn"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	start := func(workflowType string, in any) client.WorkflowRun {
		r, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflowType, in)
		require.NoError(t, err)
		return r
	}

	// A turn through the endpoint: it waits for an approval (made here
	// through Temporal), then its result is the operation's.
	job := "nexus-" + id
	caller := start("RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 6 * 7?", JobID: job})
	turn := contract.TurnWorkflowID("care", job)
	e := &env{Server: srv, t: t}
	pending := e.awaitPending(turn)
	_, err = turnclient.Approve(ctx, srv.Client(), turn, agent.ApprovalDecision{CallID: pending.CallID, ApprovalID: pending.ApprovalID, Approved: true, Approver: "ana"})
	require.NoError(t, err)
	var res agentflow.TurnResult
	require.NoError(t, caller.Get(ctx, &res))
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The result is 42.", res.Output)
	var req agent.TurnRequest
	requireTurnRequest(ctx, t, srv.Client(), turn, &req)
	require.Equal(t, agent.ChannelNexus, req.Channel)
	require.Equal(t, "billing-process", req.Caller.Name)
	require.Equal(t, nexusdoor.IssuerEndpoint, req.Caller.Issuer)

	// An input that names a tenant is refused, and nothing starts.
	err = start("RunForgedTurn", map[string]any{"prompt": "What is 1 + 1?", "tenant_id": "demo"}).Get(ctx, &res)
	var refused *temporal.ApplicationError
	require.ErrorAs(t, err, &refused, "the handler's error, under the operation's")
	require.Contains(t, refused.Error(), "the tenant and the caller are the endpoint's")

	// Cancelling the operation cancels the turn.
	job = "nexus-cancel-" + id
	caller = start("RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 2 * 3?", JobID: job})
	turn = contract.TurnWorkflowID("care", job)
	e.awaitPending(turn)
	require.NoError(t, cc.CancelWorkflow(ctx, caller.GetID(), ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, caller.Get(ctx, &res), &canceled)
	require.Eventually(t, func() bool {
		d, err := srv.Client().DescribeWorkflowExecution(ctx, turn, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, time.Minute, 100*time.Millisecond, "the turn ends CANCELED with the operation")
}

// requireTurnRequest reads the request turn id was started with.
func requireTurnRequest(ctx context.Context, t *testing.T, c client.Client, id string, req *agent.TurnRequest) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	require.NoError(t, err)
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(payloads, req))
}
