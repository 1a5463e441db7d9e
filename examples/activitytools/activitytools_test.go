package activitytools_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/examples/activitytools"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// script is the model: it looks an order up, or refunds it, and answers
// from what the team's activity returned.
const script = `
rules:
  - name: lookup
    when: {user: '(?i)where is order (\w+)'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "$1"}'}]}
  - name: refund
    when: {user: '(?i)refund order (\w+)'}
    reply: {tool_calls: [{name: refund_order, arguments: '{"order_id": "$1", "reason": "it arrived broken"}'}]}
  - name: return
    when: {user: '(?i)return order (\w+)'}
    reply: {tool_calls: [{name: return_order, arguments: '{"order_id": "$1"}'}]}
  - name: refunded
    when: {tool: '"refunded":true'}
    reply: {text: 'Refunded.'}
  - name: received
    when: {tool: '"received":true,"note":"([^"]+)"'}
    reply: {text: 'It is back: $1'}
  - name: status
    when: {tool: '"status":"(\w+)"'}
    reply: {text: 'It is $1.'}
`

// TestActivityTools runs the example: the team's worker, a process of
// its own, serves the catalog's two activity tools on its queue. A
// lookup is answered; a refund waits for a person, and the team's
// worker is SIGKILLed while it makes the refund: Temporal retries it on
// the worker started in its place (the entry's heartbeat timeout tells
// it), and the refund, keyed by the call, is made once. A return, the
// team's workflow started as the turn's child, waits for the warehouse
// while the team's worker is SIGKILLed again; it is one return, and its
// answer reaches the turn.
func TestActivityTools(t *testing.T) {
	catalog, err := os.ReadFile("catalog.yaml")
	require.NoError(t, err)
	queue := "orders-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:LookupOrder+activity:RefundOrder+workflow:AwaitReturn")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: script, TemporalAllow: allow,
		Catalogs: []string{strings.ReplaceAll(string(catalog), "task_queue: orders,", "task_queue: "+queue+",")}})

	bin := filepath.Join(t.TempDir(), "orders-worker")
	build := exec.Command("go", "build", "-o", bin, "./worker")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	ledger := t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.Address, "TEMPORAL_NAMESPACE="+srv.Namespace,
			"ORDERS_TASK_QUEUE="+queue, "ORDERS_LEDGER="+ledger, "ORDERS_REFUND_WORK=3s")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := start()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ask := func(prompt string) string {
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", Prompt: prompt, JobID: "orders-" + testserver.RandomID()})
		require.NoError(t, err)
		return run.GetID()
	}
	result := func(id string) agent.TurnResult {
		res, err := turnclient.Result(ctx, srv.Client().GetWorkflow(ctx, id, ""))
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		return res
	}

	require.Equal(t, "It is delivered.", result(ask("Where is order A17?")).Output)

	approve := func(id string) {
		var pending []agent.PendingApproval
		require.Eventually(t, func() bool {
			pending, err = turnclient.PendingApprovals(ctx, srv.Client(), id)
			return err == nil && len(pending) == 1
		}, time.Minute, 100*time.Millisecond, "the call waits for a person")
		_, err = turnclient.Approve(ctx, srv.Client(), id, agent.ApprovalDecision{CallID: pending[0].CallID, ApprovalID: pending[0].ApprovalID, Approved: true, Approver: "ana"})
		require.NoError(t, err)
	}
	id := ask("Please refund order A17.")
	approve(id)
	require.Eventually(t, func() bool {
		d, err := srv.Client().DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return false
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "RefundOrder" && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "the team's worker starts the refund")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	made, err := filepath.Glob(filepath.Join(ledger, "*.json"))
	require.NoError(t, err)
	require.Empty(t, made, "the worker died before the refund was recorded")
	second := start()

	res := result(id)
	require.Equal(t, "Refunded.", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	made, err = filepath.Glob(filepath.Join(ledger, "*.json"))
	require.NoError(t, err)
	require.Len(t, made, 1, "one refund, made by the retry on the new worker")

	// A return waits for the warehouse as the turn's child, on the team's
	// queue; the team's worker is SIGKILLed while it waits, and the
	// return goes on on the worker started in its place.
	id = ask("Please return order A17.")
	approve(id)
	returns := func() []string {
		list, err := srv.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: srv.Namespace, Query: "WorkflowType = 'AwaitReturn' AND TaskQueue = '" + queue + "'"})
		require.NoError(t, err)
		var ids []string
		for _, e := range list.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(returns()) == 1 }, time.Minute, 100*time.Millisecond, "the return waits")
	require.NoError(t, second.Process.Signal(syscall.SIGKILL))
	_ = second.Wait()
	start()
	back := returns()
	require.True(t, strings.HasPrefix(back[0], id+"/tool/"), "the turn's child, under an id of the call's: %s", back[0])
	require.NoError(t, srv.Client().SignalWorkflow(ctx, back[0], "", activitytools.ReceivedSignal, "unopened"))
	require.Equal(t, "It is back: unopened", result(id).Output)
	require.Equal(t, back, returns(), "one return for the call")
}
