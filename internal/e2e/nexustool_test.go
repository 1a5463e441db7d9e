package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	filterpb "go.temporal.io/api/filter/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// nexusHandlers is the namespace the tests' Nexus handlers run in: not
// agentflow's.
const nexusHandlers = "nexus-handlers"

const nexusToolCatalog = `
tenant: demo
default_agent: clerk
tools:
  - name: lookup_order
    kind: nexus
    description: Look an order up with the orders team.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    approval: never
    config: {endpoint: ENDPOINT, service: orders, operation: lookup}
  - name: hold_order
    kind: nexus
    description: Put an order on hold until the warehouse says.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    approval: never
    config: {endpoint: ENDPOINT, service: orders, operation: hold, schedule_to_close_sec: 300}
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [lookup_order, hold_order]
    limits: {max_iterations: 4}
`

const nexusToolScript = `
rules:
  - name: lookup
    when: {user: '(?i)where is order (\w+)'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "$1"}'}]}
  - name: hold
    when: {user: '(?i)hold order (\w+)'}
    reply: {tool_calls: [{name: hold_order, arguments: '{"order_id": "$1"}'}]}
  - name: answer
    when: {tool: '(?s)^(order .+)$'}
    reply: {text: 'The orders team said: $1'}
`

// TestNexusTool: a catalog entry of kind nexus makes the turn call an
// operation of a Nexus service through an endpoint whose handler runs in
// another namespace: a sync operation's result is the tool's, and the
// handler is told who asked in the request's header; cancelling a turn
// cancels the async operation it waits on (its workflow, in the
// handlers' namespace).
func TestNexusTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := testserver.RandomID()
	queue, endpoint := "orders-"+id, "orders-"+id
	allow, err := reach.Parse("demo=nexus_endpoint:" + endpoint)
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: nexusToolScript, TemporalAllow: allow,
		Catalogs: []string{strings.ReplaceAll(nexusToolCatalog, "ENDPOINT", endpoint)}})
	require.NoError(t, devstack.EnsureNamespace(ctx, srv.Address, nexusHandlers))
	require.NoError(t, devstack.EnsureNexusEndpoint(ctx, srv.Client(), devstack.NexusEndpoint{Name: endpoint, Namespace: nexusHandlers, TaskQueue: queue}))

	// The orders team's handler, in its own namespace.
	hc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: nexusHandlers})
	require.NoError(t, err)
	t.Cleanup(hc.Close)
	type order struct {
		OrderID string `json:"order_id"`
	}
	lookup := nexus.NewSyncOperation("lookup", func(_ context.Context, in order, o nexus.StartOperationOptions) (string, error) {
		who, ok := agentflow.WhoAskedNexus(o.Header)
		if !ok {
			return "", nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "no one asked")
		}
		return "order " + in.OrderID + " has shipped (asked by " + who.TenantID + " for " + who.JobID + ")", nil
	})
	holdOrder := func(ctx workflow.Context, in order) (string, error) {
		var said string
		workflow.GetSignalChannel(ctx, "release").ReceiveWithTimeout(ctx, time.Hour, &said)
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return "order " + in.OrderID + " released: " + said, nil
	}
	hold := temporalnexus.NewWorkflowRunOperation("hold", holdOrder, func(_ context.Context, in order, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
		return client.StartWorkflowOptions{ID: "hold-" + in.OrderID + "-" + o.RequestID}, nil
	})
	svc := nexus.NewService("orders")
	require.NoError(t, svc.Register(lookup, hold))
	w := worker.New(hc, queue, worker.Options{})
	w.RegisterNexusService(svc)
	w.RegisterWorkflowWithOptions(holdOrder, workflow.RegisterOptions{Name: "HoldOrder"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "Where is order A17?", JobID: "nexus-" + testserver.RandomID()}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "The orders team said: order A17 has shipped (asked by demo for "+req.JobID+")", res.Output)
	(&env{Server: srv, t: t}).replay(run.GetID(), "turn_nexus_tool")

	// An async operation: its workflow waits in the handlers' namespace;
	// cancelling the turn cancels it.
	req = agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "Hold order B2.", JobID: "nexus-" + testserver.RandomID()}
	run, err = turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	var held string
	require.Eventually(t, func() bool {
		list, err := hc.ListOpenWorkflow(ctx, &workflowservice.ListOpenWorkflowExecutionsRequest{
			Namespace: nexusHandlers, Filters: &workflowservice.ListOpenWorkflowExecutionsRequest_TypeFilter{TypeFilter: &filterpb.WorkflowTypeFilter{Name: "HoldOrder"}}})
		for _, e := range list.GetExecutions() {
			if strings.HasPrefix(e.GetExecution().GetWorkflowId(), "hold-B2-") {
				held = e.GetExecution().GetWorkflowId()
			}
		}
		return err == nil && held != ""
	}, time.Minute, 200*time.Millisecond, "the operation's workflow starts in the handlers' namespace")
	// The hop is linked both ways, as the Web UI shows it: the turn's
	// operation to the handler's workflow, and that workflow to the turn.
	require.Eventually(t, func() bool {
		return linked(ctx, srv.Client(), run.GetID(), enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED, nexusHandlers, held)
	}, time.Minute, 200*time.Millisecond, "the turn's operation links to the handler's workflow")
	require.True(t, linked(ctx, hc, held, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, srv.Namespace, run.GetID()),
		"the handler's workflow links back to the turn")
	require.NoError(t, srv.Client().SignalWorkflow(ctx, run.GetID(), "", contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "test"}))
	res, err = turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.Eventually(t, func() bool {
		d, err := hc.DescribeWorkflowExecution(ctx, held, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, time.Minute, 200*time.Millisecond, "the operation is cancelled with its turn")
}

// linked reports whether workflow id's first event of type kind links to
// a workflow of namespace, linkedID: what the Web UI draws as the hop.
func linked(ctx context.Context, c client.Client, id string, kind enumspb.EventType, namespace, linkedID string) bool {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false
		}
		if ev.GetEventType() != kind {
			continue
		}
		links := ev.GetLinks()
		// A workflow started by an operation links back through the
		// completion callback it was started with.
		for _, cb := range ev.GetWorkflowExecutionStartedEventAttributes().GetCompletionCallbacks() {
			links = append(links, cb.GetLinks()...)
		}
		for _, l := range links {
			if we := l.GetWorkflowEvent(); we.GetNamespace() == namespace && we.GetWorkflowId() == linkedID {
				return true
			}
		}
		return false
	}
	return false
}
