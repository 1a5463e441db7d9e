package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
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

// activityToolScript: the model looks an order up with the team's
// activity, then answers from what it returned.
const activityToolScript = `
rules:
  - name: lookup
    when: {user: '(?i)where is order (\w+)'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "$1"}'}]}
  - name: answer
    when: {tool: '(?s)"status":"shipped"'}
    reply: {text: 'It has shipped.'}
  - name: failed
    when: {tool: '(?s)no such order'}
    reply: {text: 'I could not find it.'}
  - name: misfit
    when: {tool: '(?s)^error: arguments do not fit'}
    reply: {text: 'I asked the wrong way.'}
  - name: lookup-badly
    when: {user: '(?i)where is my order'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order": 17}'}]}
`

// activityToolCatalog names the activity on queue QUEUE; the operator
// opened that queue and the type to tenant demo.
const activityToolCatalog = `
tenant: demo
default_agent: clerk
tools:
  - name: lookup_order
    kind: activity
    description: Look an order up by its id.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    approval: never
    delivery: idempotent
    config: {task_queue: QUEUE, activity_type: LookupOrder, start_to_close_sec: 30, max_attempts: 2}
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [lookup_order]
    limits: {max_iterations: 4}
`

// TestActivityTool: a catalog entry of kind activity makes the turn
// schedule the call on the team's task queue, where the team's own
// worker (not agentflow's) runs it with the model's arguments; what it
// returns is the tool's result the model reads, and what it fails with
// is the tool's error.
func TestActivityTool(t *testing.T) {
	queue := "orders-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:Lookup*")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: activityToolScript, TemporalAllow: allow,
		Catalogs: []string{strings.ReplaceAll(activityToolCatalog, "QUEUE", queue)}})

	// The team's worker, on its own queue, with a client of its own that
	// reads who asked.
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		ContextPropagators: []workflow.ContextPropagator{agentflow.AskedPropagator()}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var asked []string
	var who []agentflow.Asked
	teamWorker(t, c, queue, "LookupOrder", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		a, ok := agentflow.WhoAsked(ctx)
		mu.Lock()
		asked = append(asked, in.OrderID)
		if ok {
			who = append(who, a)
		}
		mu.Unlock()
		if in.OrderID != "A17" {
			return nil, temporal.NewNonRetryableApplicationError("no such order "+in.OrderID, "NotFound", nil)
		}
		return map[string]any{"order_id": in.OrderID, "status": "shipped"}, nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var jobs []string
	for _, tc := range []struct{ order, answer, status string }{
		{"A17", "It has shipped.", agent.ToolOK},
		{"B2", "I could not find it.", agent.ToolError},
		{"", "I asked the wrong way.", agent.ToolError}, // arguments its schema refuses
	} {
		prompt := "Where is order " + tc.order + "?"
		if tc.order == "" {
			prompt = "Where is my order?"
		}
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: prompt, JobID: "order-" + testserver.RandomID()}
		jobs = append(jobs, req.JobID)
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		require.Equal(t, tc.answer, res.Output)
		require.Len(t, res.Metadata.ToolCalls, 1)
		require.Equal(t, tc.status, res.Metadata.ToolCalls[0].Status)
		if tc.status == agent.ToolOK {
			(&env{Server: srv, t: t}).replay(run.GetID(), "turn_activity_tool")
			require.True(t, scheduledOn(ctx, srv.Client(), run.GetID(), "LookupOrder", queue),
				"the Web UI shows the call as the turn's activity on the team's queue")
		}
	}
	mu.Lock()
	require.Equal(t, []string{"A17", "B2"}, asked, "the team's worker ran each call once, with the model's arguments, and never one its schema refuses")
	require.Len(t, who, 2, "each call says who asked")
	for i, a := range who {
		require.Equal(t, "demo", a.TenantID)
		require.Equal(t, "clerk", a.AgentID)
		require.Equal(t, jobs[i], a.JobID)
		require.Equal(t, contract.TurnWorkflowID("demo", jobs[i]), a.TurnID)
		require.Equal(t, "lookup_order", a.Tool)
		require.NotEmpty(t, a.CallID)
		require.Contains(t, a.Key, jobs[i], "a key per call, the same for its attempts")
	}
	mu.Unlock()
}

// TestActivityToolCancelled: cancelling a turn cancels the team's
// activity it is waiting on, which learns it at its next heartbeat; the
// turn ends cancelled and the call with it.
func TestActivityToolCancelled(t *testing.T) {
	queue := "reports-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:SlowReport")
	require.NoError(t, err)
	catalog := strings.NewReplacer("QUEUE", queue, "lookup_order", "slow_report", "LookupOrder", "SlowReport",
		"start_to_close_sec: 30, max_attempts: 2", "start_to_close_sec: 300, heartbeat_sec: 2, max_attempts: 1").Replace(activityToolCatalog)
	script := `
rules:
  - name: report
    when: {user: '(?i)report'}
    reply: {tool_calls: [{name: slow_report, arguments: '{"order_id": "all"}'}]}
  - name: other
    reply: {text: 'Done.'}
`
	srv := testserver.Start(t, testserver.Options{Script: script, TemporalAllow: allow, Catalogs: []string{catalog}})
	started, stopped := make(chan struct{}), make(chan error, 1)
	teamWorker(t, srv.Client(), queue, "SlowReport", func(ctx context.Context, _ struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		close(started)
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				stopped <- ctx.Err()
				return "", ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "Make the report.", JobID: "report-" + testserver.RandomID()}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the team's activity never started")
	}
	asked := time.Now()
	require.NoError(t, srv.Client().SignalWorkflow(ctx, run.GetID(), "", contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "test"}))
	select {
	case err := <-stopped:
		require.ErrorIs(t, err, context.Canceled, "the activity's context is cancelled, not timed out")
		t.Logf("the team's activity saw the cancellation %v after it was asked", time.Since(asked).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("the team's activity was never cancelled")
	}
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
}

// TestActivityToolUnknown: an activity tool is delivered at most once
// unless its entry says its activity deduplicates. An attempt that runs
// past its start-to-close timeout may have done its work, so it is not
// sent again: the call's outcome is unknown, and since the tool asks a
// person, the person is asked again before the model is told. Approved,
// it is sent a second time under a key of its own; rejected, the model
// reads the unknown outcome with the decision.
func TestActivityToolUnknown(t *testing.T) {
	queue := "shop-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:PlaceOrder")
	require.NoError(t, err)
	catalog := strings.NewReplacer("QUEUE", queue, "lookup_order", "place_order", "LookupOrder", "PlaceOrder",
		"    approval: never\n", "", "    delivery: idempotent\n", "", "start_to_close_sec: 30, max_attempts: 2", "start_to_close_sec: 2").Replace(activityToolCatalog)
	script := `
rules:
  - name: place
    when: {user: '(?i)place order (\w+)'}
    reply: {tool_calls: [{name: place_order, arguments: '{"order_id": "$1"}'}]}
  - name: placed
    when: {tool: '(?s)"placed":true'}
    reply: {text: 'It is placed.'}
  - name: unknown
    when: {tool: '(?s)^(unknown outcome: .+)$'}
    reply: {text: 'I cannot tell whether it was placed: $1'}
`
	srv := testserver.Start(t, testserver.Options{Script: script, TemporalAllow: allow, Catalogs: []string{catalog}})
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		ContextPropagators: []workflow.ContextPropagator{agentflow.AskedPropagator()}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var mu sync.Mutex
	keys := map[string][]string{} // the keys each order was sent with
	teamWorker(t, c, queue, "PlaceOrder", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		a, _ := agentflow.WhoAsked(ctx)
		mu.Lock()
		keys[in.OrderID] = append(keys[in.OrderID], a.Key)
		first := len(keys[in.OrderID]) == 1
		mu.Unlock()
		if first {
			<-ctx.Done() // runs past its start-to-close timeout
			return nil, ctx.Err()
		}
		return map[string]any{"placed": true}, nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		order    string
		decision agent.ApprovalDecision
		sent     int
		status   string
		output   string
	}{
		{order: "C3", decision: agent.ApprovalDecision{Approved: true, Approver: "ana"}, sent: 2, status: agent.ToolOK, output: "It is placed."},
		{order: "D4", decision: agent.ApprovalDecision{Approver: "bob", Reason: "it is in the shop's list"}, sent: 1, status: agent.ToolUnknown,
			output: "bob was asked whether to send it again and decided not to: it is in the shop's list"},
	} {
		t.Run(tc.order, func(t *testing.T) {
			run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
				TenantID: "demo", JobID: "place-" + testserver.RandomID(), Prompt: "Place order " + tc.order + "."})
			require.NoError(t, err)
			waiting := func(resend bool) agent.PendingApproval {
				t.Helper()
				var got agent.PendingApproval
				require.Eventually(t, func() bool {
					ps, err := turnclient.PendingApprovals(ctx, srv.Client(), run.GetID())
					if err != nil || len(ps) != 1 || ps[0].Resend != resend {
						return false
					}
					got = ps[0]
					return true
				}, time.Minute, 100*time.Millisecond)
				return got
			}
			first := waiting(false)
			_, err = turnclient.Approve(ctx, srv.Client(), run.GetID(), agent.ApprovalDecision{CallID: first.CallID, ApprovalID: first.ApprovalID, Approved: true, Approver: "ana"})
			require.NoError(t, err)
			again := waiting(true)
			page, err := turnclient.Events(ctx, srv.Client(), run.GetID(), agent.EventsQuery{})
			require.NoError(t, err)
			i := slices.IndexFunc(page.Events, func(e agent.Event) bool { return e.Kind == agent.EventApprovalRequired && e.Tool.Resend })
			require.GreaterOrEqual(t, i, 0, "the person is asked again")
			require.Contains(t, page.Events[i].Tool.Reason, "PlaceOrder on "+queue+" ran past its start-to-close timeout: it may or may not have taken effect")
			mu.Lock()
			require.Len(t, keys[tc.order], 1, "nothing is sent again before the person decides")
			mu.Unlock()

			d := tc.decision
			d.CallID, d.ApprovalID = again.CallID, again.ApprovalID
			_, err = turnclient.Approve(ctx, srv.Client(), run.GetID(), d)
			require.NoError(t, err)
			res, err := turnclient.Result(ctx, run)
			require.NoError(t, err)
			require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
			require.Contains(t, res.Output, tc.output)
			require.Len(t, res.Metadata.ToolCalls, 1)
			require.Equal(t, tc.status, res.Metadata.ToolCalls[0].Status)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, keys[tc.order], tc.sent, "deliveries the team's worker saw")
			if tc.sent == 2 {
				require.NotEqual(t, keys[tc.order][0], keys[tc.order][1], "the second delivery has a key of its own")
				require.Contains(t, keys[tc.order][1], ":resend:"+again.ApprovalID)
				(&env{Server: srv, t: t}).replay(run.GetID(), "turn_activity_tool_resend")
			}
		})
	}
}

// TestActivityToolRateLimit: an activity tool's rate limit holds as every
// kind's, though the team's worker, not agentflow's, runs its calls: two
// calls asked for together, of a tool limited to one at a time, reach
// the team's activity one after the other, and the second says in the
// turn's stream that it waits.
func TestActivityToolRateLimit(t *testing.T) {
	queue := "stock-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:LookupOrder")
	require.NoError(t, err)
	catalog := strings.NewReplacer("QUEUE", queue, "    approval: never\n", "    approval: never\n    rate_limit: {concurrent: 1, per_minute: 100}\n").Replace(activityToolCatalog)
	script := `
rules:
  - name: two
    when: {user: '(?i)^both'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"order_id": "A1"}'}, {name: lookup_order, arguments: '{"order_id": "A2"}'}]}
  - name: done
    when: {tool: '(?s).+'}
    reply: {text: 'Looked up.'}
`
	srv := testserver.Start(t, testserver.Options{Script: script, TemporalAllow: allow, Catalogs: []string{catalog}})
	var inFlight, most atomic.Int32
	teamWorker(t, srv.Client(), queue, "LookupOrder", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(700 * time.Millisecond)
		return in.OrderID + " is in stock", nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", JobID: "stock-" + testserver.RandomID(), Prompt: "both"})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "Looked up.", res.Output, "%+v", res.Error)
	require.Len(t, res.Metadata.ToolCalls, 2)
	for _, c := range res.Metadata.ToolCalls {
		require.Equal(t, agent.ToolOK, c.Status)
	}
	require.EqualValues(t, 1, most.Load(), "one call at a time")
	(&env{Server: srv, t: t}).replay(run.GetID(), "turn_activity_tool_limited")
	page, err := turnclient.Events(ctx, srv.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(page.Events, func(ev agent.Event) bool {
		return ev.Kind == agent.EventToolProgress && strings.Contains(ev.Tool.Message, "its calls in flight are at the limit")
	}), "the waiting call says so")
}

// TestActivityToolAgentflowWorkerKilled: agentflow's worker is SIGKILLed
// while a turn waits on the team's activity, which runs on the team's
// worker untouched; the turn goes on on the worker started in its place
// and takes the activity's result, which was made once.
func TestActivityToolAgentflowWorkerKilled(t *testing.T) {
	queue := "orders-" + testserver.RandomID()
	p := newProcEnv(t, activityToolScript)
	p.applyTemporalCatalog(t, "demo=task_queue:"+queue+"+activity:LookupOrder",
		strings.NewReplacer("QUEUE", queue, "    delivery: idempotent\n", "", ", max_attempts: 2", "").Replace(activityToolCatalog))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	started, release := make(chan struct{}, 4), make(chan struct{})
	var calls atomic.Int32
	teamWorker(t, p.client, queue, "LookupOrder", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return map[string]any{"order_id": in.OrderID, "status": "shipped"}, nil
	})

	first := p.startWorker()
	run, err := turnclient.Start(ctx, p.client, p.queue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", Prompt: "Where is order A17?", JobID: "order-" + testserver.RandomID()})
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the team's activity never started")
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	p.startWorker()
	close(release)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "It has shipped.", res.Output)
	require.EqualValues(t, 1, calls.Load(), "the team's activity ran once")
}

// TestActivityToolProgress: what the team's activity says in its
// heartbeats (details) is the call's progress in the turn's events, as a
// tool of agentflow's own reports it.
func TestActivityToolProgress(t *testing.T) {
	queue := "packing-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:LookupOrder")
	require.NoError(t, err)
	catalog := strings.NewReplacer("QUEUE", queue, "start_to_close_sec: 30, max_attempts: 2", "start_to_close_sec: 30, heartbeat_sec: 2").Replace(activityToolCatalog)
	srv := testserver.Start(t, testserver.Options{Script: activityToolScript, TemporalAllow: allow, Catalogs: []string{catalog}})
	teamWorker(t, srv.Client(), queue, "LookupOrder", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		// A box every 2 s, heartbeating more often than heartbeat_sec (the
		// SDK sends the latest details at most every 0.8 × heartbeat_sec).
		for i := 1; i <= 3; i++ {
			for range 10 {
				activity.RecordHeartbeat(ctx, fmt.Sprintf("packed %d of 3 boxes", i))
				time.Sleep(200 * time.Millisecond)
			}
		}
		return map[string]any{"order_id": in.OrderID, "status": "shipped"}, nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", JobID: "pack-" + testserver.RandomID(), Prompt: "Where is order A17?"})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "It has shipped.", res.Output, "%+v", res.Error)
	page, err := turnclient.Events(ctx, srv.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	var said []string
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToolProgress {
			said = append(said, ev.Tool.Message)
		}
	}
	t.Logf("progress: %q", said)
	require.Contains(t, said, "packed 2 of 3 boxes", "the activity's heartbeat details, as the call's progress")
	(&env{Server: srv, t: t}).replay(run.GetID(), "turn_activity_tool_progress")
}

// teamWorker starts a worker of the team's own on queue, with client c,
// serving one activity, fn, registered as name; the test's end stops it.
func teamWorker(t *testing.T, c client.Client, queue, name string, fn any) {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// scheduledOn reports whether turn id scheduled an activity of type
// activityType on queue, under the call's activity id.
func scheduledOn(ctx context.Context, c client.Client, id, activityType, queue string) bool {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() == activityType && a.GetTaskQueue().GetName() == queue && strings.HasPrefix(a.GetActivityId(), "tool-") {
			return true
		}
	}
	return false
}
