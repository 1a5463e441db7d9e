package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	"github.com/agentflow/agentflow/internal/words"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// startTurn starts a turn from Go, as the gateway does.
func (e *env) startTurn(prompt string) string {
	e.t.Helper()
	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: prompt}
	req.Normalize()
	_, err := e.Client().ExecuteWorkflow(context.Background(), turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(e.t, err)
	return contract.TurnWorkflowID(req.TenantID, req.JobID)
}

// collect follows a stream from after and returns what it received, also
// when following ends early (ctx) — the events are then a prefix.
func collect(ctx context.Context, f *eventlog.Follower, streamID string, after int64) ([]agent.Event, error) {
	var got []agent.Event
	err := f.Follow(ctx, streamID, after, func(e agent.Event) error {
		got = append(got, e)
		return nil
	})
	return got, err
}

// requireLog checks what a client must be able to rely on: indices from
// first on with no gap and no repeat, one stream id, a terminal event at
// the end, and the text the model wrote once voided attempts are removed.
func requireLog(t *testing.T, events []agent.Event, streamID, wantText string) {
	t.Helper()
	require.NotEmpty(t, events)
	for i, e := range events {
		require.Equal(t, int64(i+1), e.Index, "event %d: %s", i, e)
		require.Equal(t, streamID, e.StreamID)
	}
	last := events[len(events)-1]
	require.True(t, last.Terminal(), "last event %s", last)
	require.Equal(t, agent.StreamCompleted, last.Status)
	require.Equal(t, wantText, agent.ReplayText(events))
}

func countTokens(events []agent.Event) (n int) {
	for _, e := range events {
		if e.Kind == agent.EventToken {
			n++
		}
	}
	return n
}

func TestStreamNormalTurn(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := e.startTurn("tell a story")
	events, err := collect(ctx, e.Follower(), id, 0)
	require.NoError(t, err)
	requireLog(t, events, id, storyText)
	require.Equal(t, agent.StreamRunning, events[0].Status)
	require.Greater(t, countTokens(events), 1, "the reply arrives in several batches")

	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, storyText, res.Output)

	// The batches — about one per interval while the model streams (~70
	// chunks over ~1s at the 200ms default) — went to the follower live,
	// and to the turn all at once with CallModel's result: no signal, and
	// no workflow task, per batch.
	signals := 0
	for _, ev := range e.history(id) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	require.Zero(t, signals)
	require.GreaterOrEqual(t, countTokens(events), 3)
	require.LessOrEqual(t, countTokens(events), 12, "about 1s / 200ms batches plus the first")
	e.replay(id, "turn_streamed")
}

// stopWhileStreaming follows turn id from its start and cancels it once
// its model has streamed tokens token events, then returns every event the
// follower saw, through the end.
func stopWhileStreaming(t *testing.T, ctx context.Context, e *env, id string, tokens int) []agent.Event {
	t.Helper()
	var mu sync.Mutex
	var live []agent.Event
	done := make(chan error, 1)
	go func() {
		done <- e.Follower().Follow(ctx, id, 0, func(ev agent.Event) error {
			mu.Lock()
			defer mu.Unlock()
			live = append(live, ev)
			return nil
		})
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return countTokens(live) >= tokens
	}, 30*time.Second, 10*time.Millisecond, "the model streams")
	require.NoError(t, e.Client().SignalWorkflow(ctx, id, "", contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "test"}))
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	return live
}

// TestStreamCanceledMidCall: a turn stopped while its model streams keeps
// what the call showed its followers: the turn seals it into the log, at
// the indices the followers saw, before its CANCELED status, so that a
// follower that watched it live and one that reads the log afterwards get
// the same events.
func TestStreamCanceledMidCall(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := e.startTurn("tell a story")

	live := stopWhileStreaming(t, ctx, e, id, 2)
	last := live[len(live)-1]
	require.Equal(t, agent.StreamCanceled, last.Status, "last event %s", last)
	for i, ev := range live {
		require.Equal(t, int64(i+1), ev.Index, "event %d: %s", i, ev)
	}
	partial := agent.ReplayText(live)
	require.NotEmpty(t, partial)
	require.True(t, strings.HasPrefix(storyText, partial), "the partial text is the story's beginning: %q", partial)
	require.Less(t, len(partial), len(storyText))

	after, err := collect(ctx, e.Follower(), id, 0)
	require.NoError(t, err)
	require.Equal(t, live, after, "the log holds what the follower saw live")
	e.replay(id, "turn_live_first_canceled")
}

func TestStreamRetriedAttemptIsVoided(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := e.startTurn("cut a story")
	events, err := collect(ctx, e.Follower(), id, 0)
	require.NoError(t, err)
	requireLog(t, events, id, storyText)
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")

	var retrying []agent.Event
	for _, ev := range events {
		if ev.Kind == agent.EventStatus && ev.Status == agent.StreamRetrying {
			retrying = append(retrying, ev)
		}
	}
	require.Len(t, retrying, 1)
	r := retrying[0]
	require.Equal(t, 2, r.Attempt)
	require.Less(t, r.VoidFrom, r.Index)
	// What the failed attempt streamed is exactly what RETRYING voids.
	var void strings.Builder
	for _, ev := range events[r.VoidFrom-1 : r.Index-1] {
		require.Equal(t, agent.EventToken, ev.Kind)
		require.Equal(t, 1, ev.Attempt)
		void.WriteString(ev.Text)
	}
	require.True(t, strings.HasPrefix(storyText, void.String()), "attempt 1 streamed a prefix: %q", void.String())
	e.replay(id, "turn_stream_retried")
}

func TestStreamClientResumes(t *testing.T) {
	e := newEnv(t)
	id := e.startTurn("tell a story")

	// The client goes away after a few events...
	ctx, cancel := context.WithCancel(context.Background())
	var first []agent.Event
	err := e.Follower().Follow(ctx, id, 0, func(ev agent.Event) error {
		first = append(first, ev)
		if ev.Kind == agent.EventToken && len(first) >= 3 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, first)

	// ...and comes back for the rest, which the turn kept producing.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	rest, err := collect(ctx2, e.Follower(), id, first[len(first)-1].Index)
	require.NoError(t, err)
	requireLog(t, append(first, rest...), id, storyText)

	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, storyText, res.Output)
	count, status, _, _ := e.resultRows(strings.TrimPrefix(id, "turn/demo/"))
	require.Equal(t, 1, count)
	require.Equal(t, agent.StatusCompleted, status)

	// Resuming past the end is the client's mistake.
	_, err = collect(ctx2, e.Follower(), id, 10_000)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	_, err = collect(ctx2, e.Follower(), "turn/demo/no-such-job", 0)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
}

// localCatalog is testCatalog with the assistant's model calls run as
// local activities (agent.ModelLocal).
var localCatalog = strings.Replace(testCatalog, "    model_execution: activity\n", "    model_execution: local\n", 1)

// TestStreamLocalModelCalls: an agent whose model calls run as local
// activities streams the same log as one whose calls are activities, live
// (a follower of a new turn reads nothing from the log), and a turn of
// it, tool call included, is one workflow task: no activity task, no
// workflow task after each call.
func TestStreamLocalModelCalls(t *testing.T) {
	require.Contains(t, localCatalog, "model_execution: local")
	e := &env{Server: testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{localCatalog}}), t: t}
	// Until the live path listens, followers read the log, which a turn
	// in a local call answers once the call is done.
	require.Eventually(t, e.Hub().Connected, time.Minute, 10*time.Millisecond)
	tests := []struct {
		name, prompt, want, history string
		calls                       int // local CallModel markers
	}{
		{"an answer", "tell a story", storyText, "turn_streamed_local", 1},
		{"a tool call and the answer", "What is 6*7?", "The result is 42.", "turn_tool_local", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: tt.prompt}
			req.Normalize()
			id := contract.TurnWorkflowID(req.TenantID, req.JobID)
			events, reads := e.startFollowed(ctx, t, req)
			requireLog(t, events, id, tt.want)
			require.Zero(t, reads, "every event came live")
			res, err := e.result(id)
			require.NoError(t, err)
			require.Equal(t, tt.want, res.Output)

			tasks, calls, handed := 0, 0, 0
			var activities []string
			for _, ev := range e.history(id) {
				switch ev.GetEventType() {
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					activities = append(activities, ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
				case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
					tasks++
				case enumspb.EVENT_TYPE_MARKER_RECORDED:
					if strings.Contains(string(ev.GetUserMetadata().GetSummary().GetData()), "iteration") {
						calls++
						if markerHandedOff(t, ev) {
							handed++
						}
					}
				}
			}
			require.Equal(t, tt.calls, calls, "each model call is a local activity's marker")
			if handed > 0 {
				// A call that outlasts the hand-off (a second, on a
				// loaded machine) is taken over by an activity, and the
				// turn goes on in the next task: TestLocalCallHandedOff.
				t.Logf("%d of %d calls handed off", handed, calls)
				require.Equal(t, slices.Repeat([]string{contract.AwaitModel}, handed), activities, "only handed-off calls leave the task")
			} else {
				require.Empty(t, activities, "no activity task")
				require.Equal(t, 1, tasks, "the turn is one workflow task")
			}
			e.replay(id, tt.history)
		})
	}
}

// localStory starts a stack whose agent calls its model as a local
// activity, and a story turn's request for it, its words delayMs apart.
func localStory(t *testing.T, delayMs int) (*env, agent.TurnRequest, string) {
	t.Helper()
	script := strings.Replace(testScript, "delay_ms: 15", fmt.Sprintf("delay_ms: %d", delayMs), 1)
	e := &env{Server: testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{localCatalog}}), t: t}
	require.Eventually(t, e.Hub().Connected, time.Minute, 10*time.Millisecond)
	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
	req.Normalize()
	return e, req, contract.TurnWorkflowID(req.TenantID, req.JobID)
}

// TestStreamJoinLocalCall: a client that joins a turn while its local
// model call streams — from the start, and from where it left off — gets
// the call's tokens live: the live path holds the turn's events from its
// first hand-on with its calls' batches, so the join reads no log, whose
// query the turn would answer only at the call's end or its workflow
// task's heartbeat.
func TestStreamJoinLocalCall(t *testing.T) {
	// A slow story: the call streams for about 3 s, under the heartbeat.
	e, req, id := localStory(t, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := server.SDKLogger(zaptest.NewLogger(t))

	// The client that starts the turn says when the call has streamed.
	streaming := make(chan int64, 1)
	first := make(chan error, 1)
	go func() {
		f := eventlog.NewFollower(e.Client(), e.Hub(), logger, 0)
		tokens := 0
		first <- followNew(ctx, f, e.Client(), turnclient.StartOptions(e.TaskQueue, req), req, func(ev agent.Event) error {
			if ev.Kind == agent.EventToken {
				if tokens++; tokens == 3 {
					streaming <- ev.Index
				}
			}
			return nil
		})
	}()
	at := <-streaming

	// Both join while the call streams.
	type joined struct {
		after, readsAtToken int64
		events              []agent.Event
		err                 error
	}
	results := make(chan joined, 2)
	for _, after := range []int64{0, at - 1} {
		go func() {
			reads := &readCounter{}
			f := eventlog.NewFollower(e.Client(), e.Hub(), logger, 0)
			f.Metrics = reads
			j := joined{after: after, readsAtToken: -1}
			j.err = f.Follow(ctx, id, after, func(ev agent.Event) error {
				j.events = append(j.events, ev)
				if ev.Kind == agent.EventToken && j.readsAtToken < 0 {
					j.readsAtToken = reads.n.Load()
				}
				return nil
			})
			results <- j
		}()
	}
	for range 2 {
		j := <-results
		require.NoError(t, j.err)
		require.Zero(t, j.readsAtToken, "after %d: the call's tokens came before any read of the log", j.after)
		require.Equal(t, j.after+1, j.events[0].Index)
		if j.after == 0 {
			requireLog(t, j.events, id, storyText)
		} else {
			require.True(t, j.events[len(j.events)-1].Terminal())
		}
	}
	require.NoError(t, <-first)
}

// TestStreamLocalCallStopped: a turn stopped while a local model call
// streams is stopped at the workflow task's next heartbeat (every 80 % of
// its task timeout, here 2 s): the call is cancelled mid-answer, and the
// turn keeps what it had written, as a stopped activity's turn does.
func TestStreamLocalCallStopped(t *testing.T) {
	// About six seconds of story: the heartbeats at 1.6 s and 3.2 s come
	// well before its end.
	e := &env{Server: testserver.Start(t, testserver.Options{
		Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 60", 1), Catalogs: []string{localCatalog}}), t: t}
	require.Eventually(t, e.Hub().Connected, time.Minute, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
	req.Normalize()
	id := contract.TurnWorkflowID(req.TenantID, req.JobID)
	opts := turnclient.StartOptions(e.TaskQueue, req)
	opts.WorkflowTaskTimeout = 2 * time.Second
	var events []agent.Event
	stopped := false
	err := followNew(ctx, e.Follower(), e.Client(), opts, req, func(ev agent.Event) error {
		events = append(events, ev)
		if !stopped && countTokens(events) == 2 {
			stopped = true
			return e.Client().SignalWorkflow(ctx, id, "", contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "test"})
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, stopped)
	end := events[len(events)-1]
	require.Equal(t, agent.StreamCanceled, end.Status, "last event %s", end)
	partial := agent.ReplayText(events)
	require.NotEmpty(t, partial)
	require.True(t, strings.HasPrefix(storyText, partial), "the partial text is the story's beginning: %q", partial)
	require.Less(t, len(partial), len(storyText), "the call was stopped before it ended")

	res, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, id, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.True(t, res.Partial)
	require.Equal(t, partial, res.Output)
}

// TestStreamCancelReachesLocalCall: a turn of an agent whose model calls
// are local, cancelled through the gateway while its model
// streams stops mid-answer at once, not at its workflow task's next
// heartbeat (8 s at the default task timeout, after the story's end):
// the gateway interrupts the call on the live path once the signal is
// in, and the turn ends as a stopped activity's does.
func TestStreamCancelReachesLocalCall(t *testing.T) {
	e := &env{Server: testserver.Start(t, testserver.Options{
		Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 60", 1), Catalogs: []string{localCatalog},
		Tokens: map[string]string{"tok-demo": "demo:user:ana"}}), t: t}
	require.Eventually(t, e.Hub().Connected, time.Minute, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
	req.Normalize()
	id := contract.TurnWorkflowID(req.TenantID, req.JobID)
	var events []agent.Event
	var sent time.Time
	err := followNew(ctx, e.Follower(), e.Client(), turnclient.StartOptions(e.TaskQueue, req), req, func(ev agent.Event) error {
		events = append(events, ev)
		if sent.IsZero() && countTokens(events) == 2 {
			sent = time.Now()
			_, err := pb.NewAgentServiceClient(e.Conn).Cancel(grpcAs(ctx, "tok-demo"), &pb.CancelRequest{StreamId: id, Reason: "enough"})
			return err
		}
		return nil
	})
	require.NoError(t, err)
	require.False(t, sent.IsZero())
	t.Logf("cancel to the stream's end: %s", time.Since(sent))
	end := events[len(events)-1]
	require.Equal(t, agent.StreamCanceled, end.Status, "last event %s", end)
	partial := agent.ReplayText(events)
	require.True(t, strings.HasPrefix(storyText, partial), "the partial text is the story's beginning: %q", partial)
	require.Less(t, len(partial), len(storyText), "the call was stopped before it ended")

	res, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, id, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.True(t, res.Partial)
	require.Equal(t, partial, res.Output)
	for _, ev := range e.history(id) {
		require.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ev.GetEventType(), "the call is local")
	}
}

// followNew starts req's turn with opts and follows its stream as the
// gateway follows a turn it starts (eventlog.Follower.FollowNew): live
// from its first event.
func followNew(ctx context.Context, f *eventlog.Follower, c client.Client, opts client.StartWorkflowOptions, req agent.TurnRequest, send func(agent.Event) error) error {
	return f.FollowNew(ctx, contract.TurnWorkflowID(req.TenantID, req.JobID), func() (string, error) {
		run, err := c.ExecuteWorkflow(ctx, opts, contract.AgentTurn, req)
		if err != nil {
			return "", err
		}
		return run.GetRunID(), nil
	}, send)
}

// TestFollowerReadsBesideLocalCall: a follower's read of the log does not
// hold back the live path. A turn in a local model call answers the log's
// query only when its workflow task completes (the call's end, or its
// hand-off after a second), and a follower reads the log whenever it
// hears nothing for a while (its idle read, 50 ms here, between tokens
// 200 ms apart): the call's tokens must still reach the client as they
// are streamed, the second before the task completes. (Before, a read in flight held them until the query was
// answered, which after a killed worker added most of a heartbeat to the
// client's pause.)
func TestFollowerReadsBesideLocalCall(t *testing.T) {
	e, req, id := localStory(t, 200)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := turnclient.StartOptions(e.TaskQueue, req)
	reads := &readCounter{}
	f := eventlog.NewFollower(e.Client(), e.Hub(), server.SDKLogger(zaptest.NewLogger(t)), 50*time.Millisecond)
	f.Metrics = reads
	var events []agent.Event
	tokens, completedAtSecond, readsAtSecond := 0, -1, int64(-1)
	err := followNew(ctx, f, e.Client(), opts, req, func(ev agent.Event) error {
		events = append(events, ev)
		if ev.Kind != agent.EventToken {
			return nil
		}
		if tokens++; tokens == 2 {
			readsAtSecond, completedAtSecond = reads.n.Load(), 0
			for it := e.Client().GetWorkflowHistory(ctx, id, "", false, 0); it.HasNext(); {
				h, err := it.Next()
				if err != nil {
					return err
				}
				if h.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
					completedAtSecond++
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	requireLog(t, events, id, storyText)
	require.Positive(t, readsAtSecond, "the follower read the log while the call streamed")
	require.Zero(t, completedAtSecond, "the second token reached the client while the workflow task that runs the call, and so the log's query, was still open")
}

// startFollowed starts a turn and follows it to its end with a follower
// that never reads the log while it waits (no idle read), and returns
// the events and how many times it read the log all the same.
func (e *env) startFollowed(ctx context.Context, t *testing.T, req agent.TurnRequest) ([]agent.Event, int64) {
	t.Helper()
	reads := &readCounter{}
	f := eventlog.NewFollower(e.Client(), e.Hub(), server.SDKLogger(zaptest.NewLogger(t)), 0)
	f.Metrics = reads
	var events []agent.Event
	err := followNew(ctx, f, e.Client(), turnclient.StartOptions(e.TaskQueue, req), req, func(ev agent.Event) error {
		events = append(events, ev)
		return nil
	})
	require.NoError(t, err)
	return events, reads.n.Load()
}

// readCounter counts a follower's reads of the log.
type readCounter struct{ n atomic.Int64 }

func (r *readCounter) LogRead(string) { r.n.Add(1) }

// TestStreamWorkerKilled kills the worker process while the model streams
// and starts another: the retried call voids the lost attempt's text and
// the client, which never disconnected, sees a clean stream. A model call
// run as a local activity is run again from its first attempt, by the
// workflow task the new worker takes over; it voids the same way.
func TestStreamWorkerKilled(t *testing.T) {
	for _, tc := range []struct{ name, catalog, prompt string }{
		{"activity", testCatalog, "tell a story"},
		{"local activity", localCatalog, "tell a story"},
		{"activity, second call", testCatalog, afterToolPrompt},
		// The kill loses the workflow task that ran the first call, the
		// tool and the start of the second: the surviving worker runs
		// them again, and the first call, behind the stream's fence now,
		// takes its stored reply as followers were shown it.
		{"local activity, second call", localCatalog, afterToolPrompt},
	} {
		t.Run(tc.name, func(t *testing.T) { streamWorkerKilled(t, tc.catalog, tc.prompt) })
	}
}

// afterToolPrompt asks for a tool call whose result the model answers
// with the story (afterToolRule).
const afterToolPrompt = "what is 6*7+0.25?"

// afterToolRule answers afterToolPrompt's tool result with the story.
const afterToolRule = `rules:
  - name: story-after-tool
    when: {tool: '^42.25$'}
    reply: {text: '` + storyText + `'}
`

func streamWorkerKilled(t *testing.T, catalog, prompt string) {
	// Two workers start, one is killed: minutes on a loaded machine.
	// Slow enough to kill the worker in the middle of the reply.
	script := strings.Replace(strings.Replace(testScript, "delay_ms: 15", "delay_ms: 40", 1), "rules:\n", afterToolRule, 1)
	p := newProcEnv(t, script, catalog)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, queue := p.client, p.queue
	pool, err := pgxpool.New(ctx, p.dbURL)
	require.NoError(t, err)
	defer pool.Close()
	hub := pglive.NewHub(pool, p.logger)
	go func() { _ = hub.Run(ctx) }()
	require.Eventually(t, hub.Connected, time.Minute, 10*time.Millisecond)
	follower := eventlog.NewFollower(c, hub, server.SDKLogger(p.logger), 0)
	first := p.startWorker()

	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: prompt}
	req.Normalize()
	id := contract.TurnWorkflowID(req.TenantID, req.JobID)

	// Followed as the gateway follows a turn it starts: live from its
	// first event. (A follower that joins a turn reads its log first,
	// which a turn in a local model call answers once the call is done.)
	// The worker is killed once the live path stores the answer's second
	// token: the call is then in flight, whenever the follower reads it (a
	// follower behind on a loaded machine may be shown the tokens only
	// after the call has ended).
	killed := make(chan error, 1)
	var killedAt atomic.Int64
	go func() {
		killed <- func() error {
			for ctx.Err() == nil {
				stored, err := hub.Stored(ctx, id, 0)
				if err == nil && countTokens(stored) >= 2 {
					if err := first.Process.Signal(syscall.SIGKILL); err != nil {
						return err
					}
					killedAt.Store(time.Now().UnixNano())
					p.startWorker()
					return nil
				}
				time.Sleep(5 * time.Millisecond)
			}
			return ctx.Err()
		}()
	}()
	var events []agent.Event
	var last time.Time
	var pause time.Duration // the longest the follower waited for an event after the kill
	err = followNew(ctx, follower, c, turnclient.StartOptions(queue, req), req, func(ev agent.Event) error {
		events = append(events, ev)
		now := time.Now()
		if k := killedAt.Load(); k != 0 && now.UnixNano() > k {
			pause = max(pause, now.Sub(time.Unix(0, max(k, last.UnixNano()))))
		}
		last = now
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, <-killed)
	// Measured, not asserted: BENCHMARKS.md and the fault suite's table
	// hold the figures.
	t.Logf("the stream paused %s after the kill", pause.Round(time.Millisecond))
	requireLog(t, events, id, storyText)
	var sawRetry bool
	for _, ev := range events {
		sawRetry = sawRetry || ev.Status == agent.StreamRetrying
	}
	require.True(t, sawRetry, "the lost attempt's text was voided: %s", eventTrace(events))
}

// eventTrace is a short line per event, for a failure's message.
func eventTrace(events []agent.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n%d %s %s step=%d attempt=%d void=%d %q", e.Index, e.Kind, e.Status, e.Step, e.Attempt, e.VoidFrom, words.Clip(e.Text, 12))
	}
	return b.String()
}

// TestSlowClientSlowsNobody follows one turn with a client that takes
// 100ms per event and one that is fast: the fast one and the turn finish
// long before the slow one, which still gets the whole log.
func TestSlowClientSlowsNobody(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := e.startTurn("tell a story")
	// The slow client reports what it got; the test's goroutine checks it.
	type followed struct {
		events []agent.Event
		err    error
	}
	slowDone := make(chan followed, 1)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // never outlive the test, also when it fails early
	wg.Go(func() {
		var got []agent.Event
		err := e.Follower().Follow(ctx, id, 0, func(ev agent.Event) error {
			got = append(got, ev)
			time.Sleep(100 * time.Millisecond)
			return nil
		})
		slowDone <- followed{got, err}
	})
	fast, err := collect(ctx, e.Follower(), id, 0)
	require.NoError(t, err)
	requireLog(t, fast, id, storyText)
	_, err = e.result(id)
	require.NoError(t, err)
	select {
	case <-slowDone:
		t.Fatal("the slow client finished first: it held the others back")
	default:
	}
	slow := <-slowDone
	require.NoError(t, slow.err)
	require.Equal(t, fast, slow.events)
}

// queryCounter counts the queries a follower makes through the real client.
type queryCounter struct {
	client.Client
	queries atomic.Int32
}

func (c *queryCounter) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	c.queries.Add(1)
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

// TestStreamNewTurnFollowsLive follows streamed turns the way the gateway's
// Stream does (subscribed before the start): the turn's own events reach
// the client with the activities that follow them, the reply's tokens
// with CallModel, and what came last with SaveResult, once the result is
// stored, or with the workflow's close (its stream_tail), whichever is
// first: the log is never read. One turn streams a story, one calls a
// tool first.
func TestStreamNewTurnFollowsLive(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A follower that subscribes before the listener is up reads the log.
	require.Eventually(t, e.Hub().Connected, 10*time.Second, 10*time.Millisecond)
	for _, tc := range []struct{ prompt, text, history string }{
		{"tell a story", storyText, "turn_streamed_end_live"},
		{"What is 12.5 * 4?", "The result is 50.", "turn_streamed_live_tool"},
	} {
		counter := &queryCounter{Client: e.Client()}
		follower := eventlog.NewFollower(counter, e.Hub(), server.SDKLogger(zaptest.NewLogger(t)), 0)
		req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: tc.prompt}
		req.Normalize()
		id := contract.TurnWorkflowID(req.TenantID, req.JobID)
		sub := e.Hub().Subscribe(id)
		var got []agent.Event
		err := follower.FollowNew(ctx, id, func() (string, error) {
			run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
			if err != nil {
				return "", err
			}
			return run.GetRunID(), nil
		}, func(ev agent.Event) error {
			got = append(got, ev)
			return nil
		})
		require.NoError(t, err, tc.prompt)
		requireLog(t, got, id, tc.text)
		require.Zero(t, counter.queries.Load(), "%s: no read of the log: the close carried its end", tc.prompt)
		// The log holds what the client got.
		logged, err := collect(ctx, e.Follower(), id, 0)
		require.NoError(t, err)
		require.Equal(t, logged, got, tc.prompt)
		// The end came on the live path too, before the close.
		var live []agent.Event
		for len(live) == 0 || !live[len(live)-1].Terminal() {
			select {
			case evs := <-sub.Events():
				live = append(live, evs...)
			case <-sub.Lagged():
				t.Fatalf("%s: the live subscription lagged", tc.prompt)
			case <-ctx.Done():
				t.Fatalf("%s: no terminal event on the live path: %+v", tc.prompt, live)
			}
		}
		for _, ev := range live {
			require.Equal(t, logged[ev.Index-1], ev, tc.prompt)
		}
		sub.Close()
		if tc.history != "" {
			e.replay(id, tc.history)
		}
	}
}

// TestStopKeepsPartialAnswer: a turn stopped while its model streams keeps
// what the model had written as its partial answer — in its result
// (marked partial), in the stream's last events before CANCELED, and in
// the session's transcript, from which the next turn's model reads it
// with a note that it was cut short; a client that reconnects sees the
// same ending.
func TestStopKeepsPartialAnswer(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session := "stop-" + testserver.RandomID()
	start := func(prompt string) (string, string) {
		req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), SessionID: session, Prompt: prompt}
		req.Normalize()
		_, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
		require.NoError(t, err)
		return req.JobID, contract.TurnWorkflowID(req.TenantID, req.JobID)
	}
	job, id := start("tell a story")

	live := stopWhileStreaming(t, ctx, e, id, 3)
	partial := agent.ReplayText(live)
	require.NotEmpty(t, partial)
	require.True(t, strings.HasPrefix(storyText, partial), "the partial text is the story's beginning: %q", partial)
	require.Less(t, len(partial), len(storyText))

	// The stream ends with the partial answer, then CANCELED; a client
	// that reconnects sees the same ending (both are printed when not).
	after, err := collect(ctx, e.Follower(), id, 0)
	require.NoError(t, err)
	require.Equal(t, live, after, "a client that reconnects sees the same ending")
	require.GreaterOrEqual(t, len(live), 2)
	end, content := live[len(live)-1], live[len(live)-2]
	require.Equal(t, agent.StreamCanceled, end.Status, "last event %s", end)
	require.Equal(t, agent.EventContent, content.Kind, "the event before the end %s", content)
	var block agent.Block
	require.NoError(t, json.Unmarshal(content.Content, &block))
	require.Equal(t, agent.Block{Type: agent.BlockText, Text: partial, Partial: true}, block)

	// The result keeps it, stored and as the workflow returned it.
	res, err := turnclient.Result(ctx, e.Client().GetWorkflow(ctx, id, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCanceled, res.Status)
	require.True(t, res.Partial)
	require.Equal(t, partial, res.Output)
	stored, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.True(t, stored.Partial)
	require.Equal(t, partial, stored.Output)
	require.Equal(t, []agent.Block{{Type: agent.BlockText, Text: partial, Partial: true}}, stored.Blocks)

	// The transcript has the exchange, and the next turn's model reads the
	// partial answer as cut short.
	msgs, err := e.Store().SessionMessages(ctx, "demo", session, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, agent.Message{Role: agent.RoleAssistant, Content: partial, Partial: true}, msgs[1])
	_, next := start("what is 2+2?")
	res, err = e.result(next)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	var sent []string
	for _, r := range e.Model.Requests() {
		if len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Content == "what is 2+2?" {
			for _, m := range r.Messages {
				sent = append(sent, m.Role+": "+m.Content)
			}
		}
	}
	require.Equal(t, []string{
		"system: Use the calculator for arithmetic.",
		"user: tell a story",
		"assistant: " + partial + agent.InterruptedNote,
		"user: what is 2+2?",
	}, sent)
	e.replay(id, "turn_stopped_partial")
}
