package e2e

import (
	"context"
	"path/filepath"
	"syscall"
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
// through the endpoint the operator bound to tenant care, decides its
// approval through the decide operation (the approver is the binding's
// name), and gets its result, from run_turn and from get_result. The
// endpoint bound to tenant demo finds no such turn to decide, answer or
// read (and cancels none: TestCancelOtherTenant); an input naming a
// tenant is refused, saying why. Cancelling the
// operation cancels the turn, which ends CANCELED.
func TestAgentsNexusService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	endpoint, other := "agents-"+id, "agents-demo-"+id
	srv := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{careCatalog},
		NexusBindings: []nexusdoor.Binding{
			{TaskQueue: endpoint, TenantID: "care", Roles: []string{"user", "approver"}, Name: "billing-process"},
			{TaskQueue: other, TenantID: "demo", Roles: []string{"user", "approver"}, Name: "demo-process"},
		}})
	cc := callerClient(ctx, t, srv.Address, srv.Client(), srv.Namespace, endpoint, other)

	// The billing team's workflows, in their own namespace.
	// call calls any operation through either endpoint, with any input.
	type opCall struct {
		Endpoint, Op string
		Input        map[string]any
	}
	call := func(ctx workflow.Context, in opCall) (map[string]any, error) {
		var out map[string]any
		err := workflow.NewNexusClient(in.Endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, in.Op, in.Input, workflow.NexusOperationOptions{}).Get(ctx, &out)
		return out, err
	}
	queue := "billing-" + id
	callerWorker(t, cc, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(runVia(endpoint), workflow.RegisterOptions{Name: "RunAgentTurn"})
		w.RegisterWorkflowWithOptions(call, workflow.RegisterOptions{Name: "CallAgents"})
	})
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
	refusedWith := func(err error, want string) {
		t.Helper()
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app, "the handler's error, under the operation's: %v", err)
		require.Contains(t, app.Error(), want)
	}
	var out map[string]any
	decision := map[string]any{"job_id": job, "call_id": pending.CallID, "approval_id": pending.ApprovalID, "approved": true}
	// Another tenant's endpoint finds no such turn, to decide or to read:
	// the job is looked up in its own tenant.
	refusedWith(start("CallAgents", opCall{Endpoint: other, Op: nexusdoor.OpDecide, Input: decision}).Get(ctx, &out), "no such turn")
	refusedWith(start("CallAgents", opCall{Endpoint: other, Op: nexusdoor.OpGetResult, Input: map[string]any{"job_id": job}}).Get(ctx, &out), "no such turn")
	refusedWith(start("CallAgents", opCall{Endpoint: other, Op: nexusdoor.OpAnswer,
		Input: map[string]any{"job_id": job, "call_id": pending.CallID, "answer": "yes"}}).Get(ctx, &out), "no such turn")
	refusedWith(start("CallAgents", opCall{Endpoint: endpoint, Op: nexusdoor.OpGetResult, Input: map[string]any{"job_id": job}}).Get(ctx, &out), "still running")
	// The approval, through the decide operation, as the binding's approver.
	require.NoError(t, start("CallAgents", opCall{Endpoint: endpoint, Op: nexusdoor.OpDecide, Input: decision}).Get(ctx, &out))
	require.Equal(t, agent.ApprovalApproved, out["outcome"])
	var res agentflow.TurnResult
	require.NoError(t, caller.Get(ctx, &res))
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The result is 42.", res.Output)
	require.NoError(t, start("CallAgents", opCall{Endpoint: endpoint, Op: nexusdoor.OpGetResult, Input: map[string]any{"job_id": job}}).Get(ctx, &out))
	require.Equal(t, "The result is 42.", out["output"], "get_result reads the closed turn")
	var req agent.TurnRequest
	requireTurnRequest(ctx, t, srv.Client(), turn, &req)
	require.Equal(t, agent.ChannelNexus, req.Channel)
	require.Equal(t, "billing-process", req.Caller.Name)
	require.Equal(t, nexusdoor.IssuerEndpoint, req.Caller.Issuer)
	requireApprover(ctx, t, srv.Client(), turn, "billing-process")
	// The same request again (its job id) is answered with the ended
	// turn's result; another request under that job id is refused.
	var again agentflow.TurnResult
	require.NoError(t, start("RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 6 * 7?", JobID: job}).Get(ctx, &again))
	require.Equal(t, res, again)
	refusedWith(start("RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 7 * 7?", JobID: job}).Get(ctx, &again), "names another request")
	// The hop is linked both ways, as the Web UI shows it.
	require.True(t, linked(ctx, cc, caller.GetID(), enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED, srv.Namespace, turn),
		"the caller's operation links to the turn")
	require.True(t, linked(ctx, srv.Client(), turn, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, callers, caller.GetID()),
		"the turn links back to its caller")

	// An input that names a tenant is refused, and nothing starts.
	refusedWith(start("CallAgents", opCall{Endpoint: endpoint, Op: nexusdoor.OpRunTurn,
		Input: map[string]any{"prompt": "What is 1 + 1?", "tenant_id": "demo"}}).Get(ctx, &out), "the tenant and the caller are the endpoint's")

	// Cancelling the operation cancels the turn.
	job = "nexus-cancel-" + id
	caller = start("RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 2 * 3?", JobID: job})
	turn = contract.TurnWorkflowID("care", job)
	e.awaitPending(turn)
	require.NoError(t, cc.CancelWorkflow(ctx, caller.GetID(), ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, caller.Get(ctx, &res), &canceled)
	requireTurnCanceled(ctx, t, srv.Client(), turn)
}

// requireTurnCanceled waits for turn id to end CANCELED, as a cancelled
// operation's turn does.
func requireTurnCanceled(ctx context.Context, t *testing.T, c client.Client, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, time.Minute, 100*time.Millisecond, "the turn ends CANCELED with the operation")
}

// TestAgentsNexusServiceTypeScript: a workflow of Temporal's TypeScript
// SDK (examples/process/typescript, @temporalio/workflow pinned by its
// lockfile), in namespace teams, runs a turn through the endpoint and
// decides its approval through the decide operation; its result is the
// turn's.
func TestAgentsNexusServiceTypeScript(t *testing.T) {
	dir := nodeClientAt(t, filepath.Join("..", "..", "examples", "process", "typescript"), "@temporalio/workflow")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	endpoint := "agents-ts-" + id
	srv := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{careCatalog},
		NexusBindings: []nexusdoor.Binding{{TaskQueue: endpoint, TenantID: "care", Roles: []string{"user", "approver"}, Name: "ts-process"}}})
	cc := callerClient(ctx, t, srv.Address, srv.Client(), srv.Namespace, endpoint)
	queue := "process-ts-" + id
	startNodeWorker(t, dir, "TEMPORAL_ADDRESS="+srv.Address, "TEMPORAL_NAMESPACE="+callers, "PROCESS_TASK_QUEUE="+queue)

	job := "nexus-ts-" + id
	caller, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "runAgentTurn", endpoint,
		agentflow.RunTurnInput{Prompt: "What is 6 * 7?", JobID: job})
	require.NoError(t, err)
	turn := contract.TurnWorkflowID("care", job)
	pending := (&env{Server: srv, t: t}).awaitPending(turn)
	decided, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "decideApproval", endpoint,
		agentflow.DecideInput{JobID: job, CallID: pending.CallID, ApprovalID: pending.ApprovalID, Approved: true})
	require.NoError(t, err)
	var ack agentflow.ApprovalAck
	require.NoError(t, decided.Get(ctx, &ack))
	require.Equal(t, agent.ApprovalApproved, ack.Outcome)
	var res agentflow.TurnResult
	require.NoError(t, caller.Get(ctx, &res))
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The result is 42.", res.Output)
	requireApprover(ctx, t, srv.Client(), turn, "ts-process")
}

// callerClient makes namespace callers and an endpoint named as its
// queue for each of endpoints, routed to agentflow's namespace through
// c, and dials namespace callers at address.
func callerClient(ctx context.Context, t *testing.T, address string, c client.Client, namespace string, endpoints ...string) client.Client {
	t.Helper()
	require.NoError(t, devstack.EnsureNamespace(ctx, address, callers))
	for _, e := range endpoints {
		require.NoError(t, devstack.EnsureNexusEndpoint(ctx, c, devstack.NexusEndpoint{Name: e, Namespace: namespace, TaskQueue: e}))
	}
	cc, err := client.Dial(client.Options{HostPort: address, Namespace: callers})
	require.NoError(t, err)
	t.Cleanup(cc.Close)
	return cc
}

// callerWorker runs the workflows register registers on queue of the
// callers' namespace, until the test ends.
func callerWorker(t *testing.T, cc client.Client, queue string, register func(worker.Worker)) {
	t.Helper()
	w := worker.New(cc, queue, worker.Options{})
	register(w)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// runVia is the billing team's workflow that runs a turn through
// endpoint and returns its result.
func runVia(endpoint string) func(workflow.Context, agentflow.RunTurnInput) (agentflow.TurnResult, error) {
	return func(ctx workflow.Context, in agentflow.RunTurnInput) (agentflow.TurnResult, error) {
		var res agentflow.TurnResult
		err := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, agentflow.RunTurn, in, workflow.NexusOperationOptions{}).Get(ctx, &res)
		return res, err
	}
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

// requireApprover checks that turn id's approval was made by approver.
func requireApprover(ctx context.Context, t *testing.T, c client.Client, id, approver string) {
	t.Helper()
	page, err := turnclient.Events(ctx, c, id, agent.EventsQuery{})
	require.NoError(t, err)
	for _, ev := range page.Events {
		if ev.Approval != nil && ev.Approval.Outcome == agent.ApprovalApproved {
			require.Equal(t, approver, ev.Approval.Approver)
			return
		}
	}
	t.Fatalf("turn %s has no approval", id)
}

// TestAgentsNexusServiceWorkerKilled: agentflow's worker, which serves
// the endpoint's queue and runs the turn, is SIGKILLed while a turn
// started through the endpoint waits for an approval; on the worker
// started in its place the turn goes on, and the caller's operation gets
// the one result.
func TestAgentsNexusServiceWorkerKilled(t *testing.T) {
	id := testserver.RandomID()
	endpoint := "agents-kill-" + id
	p := newProcEnv(t, testScript, careCatalog)
	p.environ = append(p.environ, nexusdoor.EnvBindings+"="+endpoint+"=care:user+approver:billing-process")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc := callerClient(ctx, t, p.address, p.client, p.namespace, endpoint)
	queue := "billing-kill-" + id
	callerWorker(t, cc, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(runVia(endpoint), workflow.RegisterOptions{Name: "RunAgentTurn"})
	})

	first := p.startWorker()
	job := "nexus-kill-" + id
	caller, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "RunAgentTurn", agentflow.RunTurnInput{Prompt: "What is 6 * 7?", JobID: job})
	require.NoError(t, err)
	turn := contract.TurnWorkflowID("care", job)
	var pending []agent.PendingApproval
	require.Eventually(t, func() bool {
		pending, err = turnclient.PendingApprovals(ctx, p.client, turn)
		return err == nil && len(pending) == 1
	}, time.Minute, 100*time.Millisecond, "the turn waits for approval")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	p.startWorker()
	_, err = turnclient.Approve(ctx, p.client, turn, agent.ApprovalDecision{CallID: pending[0].CallID, ApprovalID: pending[0].ApprovalID, Approved: true, Approver: "ana"})
	require.NoError(t, err)
	var res agentflow.TurnResult
	require.NoError(t, caller.Get(ctx, &res))
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The result is 42.", res.Output)
}
