package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// A Workflow Streams client, written from the protocol's documents
// (Temporal's contrib/workflowstreams: types.go, codec.go, client.go, and
// the Python and TypeScript packages of the same protocol), not from
// agentflow's code: handler names, JSON envelopes, base64 of a
// protobuf-marshalled Payload per item, the follow loop and its errors.

const (
	wsPollUpdate  = "__temporal_workflow_stream_poll"
	wsOffsetQuery = "__temporal_workflow_stream_offset"
	wsCooldown    = 100 * time.Millisecond
)

type wsPollInput struct {
	Topics     []string `json:"topics"`
	FromOffset int64    `json:"from_offset"`
}

type wsWireItem struct {
	Topic  string `json:"topic"`
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
}

type wsPollResult struct {
	Items      []wsWireItem `json:"items"`
	NextOffset int64        `json:"next_offset"`
	MoreReady  bool         `json:"more_ready"`
}

// wsItem is an item as a subscriber holds it: its Payload decoded from
// the wire.
type wsItem struct {
	Topic   string
	Offset  int64
	Payload *commonpb.Payload
}

// wsFollowed is what one subscriber saw: the items, in order, and every
// poll's answer.
type wsFollowed struct {
	items   []wsItem
	answers []wsPollResult
	// draining counts the polls refused with StreamDraining, truncated
	// those failed with TruncatedOffset.
	draining, truncated int
	// stalled counts poll attempts that had no answer within
	// wsPollAttempt and were made again (wsPoll).
	stalled int
	// runs are the runs that answered polls, in order.
	runs []string
	// end is the failure of the last poll, after which the run was found
	// closed.
	end error
}

// wsSubscribe follows workflowID's stream from offset as the protocol's
// client does: poll (Accepted stage, the latest run), take the items, go
// on from next_offset, at once when more_ready, after a cooldown when
// not; TruncatedOffset starts again from 0, StreamDraining waits and
// polls again, and any other failure ends the subscription cleanly when
// the polled run has closed.
func wsSubscribe(ctx context.Context, c client.Client, workflowID string, topics []string, offset int64) (wsFollowed, error) {
	return wsFollow(ctx, c, workflowID, topics, offset, nil)
}

// wsFollow is wsSubscribe that also stops, without an error, once until
// says the items so far are enough: a stream that never ends (a
// conversation's) has no other end.
func wsFollow(ctx context.Context, c client.Client, workflowID string, topics []string, offset int64, until func([]wsItem) bool) (wsFollowed, error) {
	var f wsFollowed
	if topics == nil {
		topics = []string{}
	}
	var polledRun string
	for {
		if err := ctx.Err(); err != nil {
			return f, err
		}
		raw, runID, err := wsPoll(ctx, c, workflowID, wsPollInput{Topics: topics, FromOffset: offset}, &f.stalled)
		if runID != "" {
			polledRun = runID
		}
		if err != nil {
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.Type() == "TruncatedOffset" {
				f.truncated++
				offset = 0
				continue
			}
			if errors.As(err, &app) && app.Type() == "StreamDraining" {
				f.draining++
				time.Sleep(wsCooldown)
				continue
			}
			// Its own bound: the poll may have used up ctx's.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			desc, derr := c.DescribeWorkflowExecution(dctx, workflowID, polledRun)
			cancel()
			if derr != nil {
				return f, fmt.Errorf("poll from offset %d (%d answers from %d runs, %d attempts made again): %w; describe: %v",
					offset, len(f.answers), len(f.runs), f.stalled, err, derr)
			}
			switch desc.GetWorkflowExecutionInfo().GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
				continue
			case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
				enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
				enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
				f.end = err
				return f, nil
			}
			return f, err
		}
		var res wsPollResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return f, fmt.Errorf("decode poll result %s: %w", raw, err)
		}
		if res.Items == nil {
			return f, fmt.Errorf("poll result %s: items is null", raw)
		}
		f.answers = append(f.answers, res)
		if n := len(f.runs); n == 0 || f.runs[n-1] != polledRun {
			f.runs = append(f.runs, polledRun)
		}
		for _, it := range res.Items {
			b, err := base64.StdEncoding.DecodeString(it.Data)
			if err != nil {
				return f, fmt.Errorf("item %d: %w", it.Offset, err)
			}
			p := &commonpb.Payload{}
			if err := proto.Unmarshal(b, p); err != nil {
				return f, fmt.Errorf("item %d: %w", it.Offset, err)
			}
			f.items = append(f.items, wsItem{Topic: it.Topic, Offset: it.Offset, Payload: p})
		}
		if until != nil && until(f.items) {
			return f, nil
		}
		offset = res.NextOffset
		if !res.MoreReady {
			time.Sleep(wsCooldown)
		}
	}
}

// wsPollAttempt bounds one attempt of a poll. A poll waits for items
// (a turn's next event comes within seconds) and the turn answers every
// poll before it closes; yet on a loaded machine a poll was seen to get
// no answer at all for minutes after the turn had ended (the server
// keeps an update open while workflow tasks time out, and one completed
// in the task that continued as new can be delivered again). A
// subscriber bounds each attempt and polls again with the same update
// id, which the server deduplicates: the poll reads and changes nothing.
const wsPollAttempt = 45 * time.Second

// wsPoll makes one poll: the update, accepted in the latest run, and its
// answer, each attempt bounded by wsPollAttempt; stalled counts the
// attempts made again. runID is the run that accepted it.
func wsPoll(ctx context.Context, c client.Client, workflowID string, in wsPollInput, stalled *int) (json.RawMessage, string, error) {
	id := "poll-" + rand.Text()
	for {
		actx, cancel := context.WithTimeout(ctx, wsPollAttempt)
		var raw json.RawMessage
		var runID string
		h, err := c.UpdateWorkflow(actx, client.UpdateWorkflowOptions{
			UpdateID: id, WorkflowID: workflowID, UpdateName: wsPollUpdate,
			Args: []any{in}, WaitForStage: client.WorkflowUpdateStageAccepted,
		})
		if err == nil {
			runID = h.RunID()
			err = h.Get(actx, &raw)
		}
		spent := actx.Err() != nil
		cancel()
		// An attempt that ran out of time is made again with the same
		// update id. The server may end it first: it keeps the deadline the
		// attempt sent and resets the stream (gRPC Canceled) a moment before
		// the client's own timer fires, so the SDK's timeout-or-cancelled
		// error counts too while the poll's own context lives.
		var late *client.WorkflowUpdateServiceTimeoutOrCanceledError
		if err != nil && ctx.Err() == nil && (spent || errors.As(err, &late)) {
			*stalled++
			continue
		}
		return raw, runID, err
	}
}

// wsJSON decodes an item's JSON payload.
func wsJSON(t *testing.T, it wsItem, v any) {
	t.Helper()
	require.Equal(t, "json/plain", string(it.Payload.GetMetadata()["encoding"]), "item %d", it.Offset)
	require.NoError(t, json.Unmarshal(it.Payload.GetData(), v), "item %d", it.Offset)
}

// wsEvents and wsText are the items of the events and text topics.
func wsEvents(t *testing.T, items []wsItem) []agent.Event {
	t.Helper()
	var out []agent.Event
	for _, it := range items {
		if it.Topic == "events" {
			var e agent.Event
			wsJSON(t, it, &e)
			out = append(out, e)
		}
	}
	return out
}

func wsText(t *testing.T, items []wsItem) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		if it.Topic == "text" {
			var s string
			wsJSON(t, it, &s)
			out = append(out, s)
		}
	}
	return out
}

// streamsToken is the gateway's token in these tests.
const streamsToken = "ws-token"

// streamsCatalog's calculator needs approval; the story prompts use no
// tool.
const streamsCatalog = `
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
    approval: always
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Use the calculator for arithmetic.
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 120}
`

type streamsEnv struct {
	*env
	agents pb.AgentServiceClient
}

func newStreamsEnv(t *testing.T) *streamsEnv {
	t.Helper()
	// Slow enough that subscribers start while the turn runs.
	return newStreamsEnvWith(t, strings.Replace(testScript, "delay_ms: 15", "delay_ms: 30", 1))
}

// newStreamsEnvWith is newStreamsEnv with another model script.
func newStreamsEnvWith(t *testing.T, script string) *streamsEnv {
	t.Helper()
	ts := testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{streamsCatalog},
		Tokens: map[string]string{streamsToken: "demo:user+approver"}})
	return &streamsEnv{env: &env{Server: ts, t: t}, agents: pb.NewAgentServiceClient(ts.Conn)}
}

func (e *streamsEnv) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+streamsToken)
}

// recvAll reads a gRPC stream of events to its end, handing each event to
// seen as it arrives.
func recvAll(s pb.AgentService_StreamClient, seen func(agent.Event)) ([]agent.Event, error) {
	var out []agent.Event
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		e := gateway.FromPBEvent(ev)
		out = append(out, e)
		if seen != nil {
			seen(e)
		}
	}
}

// resume reads a turn's events after index after over gRPC Resume.
func (e *streamsEnv) resume(ctx context.Context, id string, after int64) []agent.Event {
	e.t.Helper()
	s, err := e.agents.Resume(e.auth(ctx), &pb.ResumeRequest{StreamId: id, AfterIndex: after})
	require.NoError(e.t, err)
	evs, err := recvAll(s, nil)
	require.NoError(e.t, err)
	return evs
}

// asGRPC is an event as the gRPC API carries it: what FromPBEvent gives
// back of it.
func asGRPC(e agent.Event) agent.Event {
	// A usage event carries three counts; step_finish carries them all.
	if e.Usage != nil && e.Kind == agent.EventUsage {
		e.Usage = &agent.Usage{PromptTokens: e.Usage.PromptTokens, CompletionTokens: e.Usage.CompletionTokens, TotalTokens: e.Usage.TotalTokens}
	}
	if e.Error != nil {
		e.Error = &agent.TurnError{Type: e.Error.Type, Message: e.Error.Message, Retryable: e.Error.Retryable}
	}
	if e.Tool != nil {
		tool := *e.Tool
		if tool.Deadline != nil {
			d := tool.Deadline.UTC()
			tool.Deadline = &d
		}
		e.Tool = &tool
	}
	return e
}

func asGRPCAll(evs []agent.Event) []agent.Event {
	out := make([]agent.Event, len(evs))
	for i, e := range evs {
		out[i] = asGRPC(e)
	}
	return out
}

// subscription is a subscriber running beside the turn.
type subscription struct {
	from   int64
	topics []string
	got    wsFollowed
	err    error
}

// subscribe starts subscribers of the turn from each offset (all topics)
// and one of the text topic from 0; wait returns once all have ended.
func (e *streamsEnv) subscribe(ctx context.Context, id string, offsets ...int64) (subs []*subscription, text *subscription, wait func()) {
	var wg sync.WaitGroup
	start := func(s *subscription) {
		wg.Go(func() { s.got, s.err = wsSubscribe(ctx, e.Client(), id, s.topics, s.from) })
	}
	for _, o := range offsets {
		s := &subscription{from: o}
		subs = append(subs, s)
		start(s)
	}
	text = &subscription{topics: []string{"text"}}
	start(text)
	return subs, text, wg.Wait
}

// requireSameStream checks what every reader of a finished turn must
// agree on: the subscriber from 0 got the whole log (the events query's,
// event for event) and the gRPC stream's events, once each, in order, at
// offsets 0, 1, 2, … through the final status; a subscriber from an
// offset got exactly the items from there; the text topic is the replies'
// final text; gRPC Resume from any index gives the rest; and the offset
// query counts the items.
func (e *streamsEnv) requireSameStream(ctx context.Context, id string, grpcEvents []agent.Event, subs []*subscription, text *subscription) []agent.Event {
	t := e.t
	t.Helper()
	full := subs[0]
	require.Zero(t, full.from)
	for _, s := range append(subs, text) {
		require.NoError(t, s.err, "subscriber from %d %v", s.from, s.topics)
		t.Logf("subscriber from %d %v: %d items, %d answers, %d refused as draining, ended by %v", s.from, s.topics, len(s.got.items), len(s.got.answers), s.got.draining, s.got.end)
	}
	for i, it := range full.got.items {
		require.Equal(t, int64(i), it.Offset, "offsets are global, from 0, and a subscriber of every topic sees each")
	}
	polled := wsEvents(t, full.got.items)
	page, err := turnclient.Events(ctx, e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, page.Events, polled, "the events topic is the log")
	require.Equal(t, grpcEvents, asGRPCAll(polled), "the events topic is what gRPC Stream sent")
	last := polled[len(polled)-1]
	require.True(t, last.Terminal(), "the subscriber got the final status before the workflow closed: %s", last)

	for _, s := range subs[1:] {
		var want []wsItem
		for _, it := range full.got.items {
			if it.Offset >= s.from {
				want = append(want, it)
			}
		}
		require.Equal(t, len(want), len(s.got.items), "subscriber from %d", s.from)
		for i := range want {
			require.Equal(t, want[i].Offset, s.got.items[i].Offset)
			require.True(t, proto.Equal(want[i].Payload, s.got.items[i].Payload), "subscriber from %d, item %d", s.from, want[i].Offset)
		}
	}
	texts := wsText(t, full.got.items)
	require.Equal(t, texts, wsText(t, text.got.items))
	for _, it := range text.got.items {
		require.Equal(t, "text", it.Topic)
	}
	require.Equal(t, agent.ReplayText(polled), strings.Join(texts, ""), "the text topic holds the text the events fold to, and nothing voided")

	for _, after := range []int64{0, 1, 3, int64(len(grpcEvents)) - 2, int64(len(grpcEvents)) - 1} {
		require.Equal(t, grpcEvents[after:], e.resume(ctx, id, after), "Resume after %d", after)
	}

	v, err := e.Client().QueryWorkflow(ctx, id, "", wsOffsetQuery)
	require.NoError(t, err)
	var offset int64
	require.NoError(t, v.Get(&offset))
	require.Equal(t, int64(len(full.got.items)), offset)
	return polled
}

// requireDrained checks a subscriber that waited past the end of the
// stream: the turn answered its poll as it ended (an empty page at the
// stream's end), rather than closing with the poll unanswered.
func requireDrained(t *testing.T, s *subscription, end int64) {
	t.Helper()
	require.NoError(t, s.err)
	require.Empty(t, s.got.items)
	require.NotEmpty(t, s.got.answers, "the poll in flight was answered")
	a := s.got.answers[0]
	require.Empty(t, a.Items)
	require.Equal(t, end, a.NextOffset)
	require.False(t, a.MoreReady)
}

// TestWorkflowStreamsApprovedToolCall: subscribers of a streamed turn whose
// tool call waits for approval and is approved, polling with Temporal's
// protocol from several offsets, get exactly the events gRPC Stream and Resume
// give, and the answer's text; the temporal CLI reads the stream as
// docs/guides/workflow-streams.md shows; one waiting past the end is answered
// as the turn ends.
func TestWorkflowStreamsApprovedToolCall(t *testing.T) {
	e := newStreamsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "ws-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"}})
	require.NoError(t, err)

	type streamed struct {
		events []agent.Event
		err    error
	}
	grpcDone := make(chan streamed, 1)
	started := make(chan struct{})
	waiting := make(chan string, 1)
	go func() {
		var once sync.Once
		evs, err := recvAll(s, func(ev agent.Event) {
			once.Do(func() { close(started) })
			if ev.Kind == agent.EventApprovalRequired {
				waiting <- ev.Tool.CallID
			}
		})
		grpcDone <- streamed{evs, err}
	}()
	<-started
	subs, text, wait := e.subscribe(ctx, id, 0, 2, 5, 9)
	far := &subscription{from: 1000}
	var farDone sync.WaitGroup
	farDone.Go(func() { far.got, far.err = wsSubscribe(ctx, e.Client(), id, []string{"events"}, far.from) })

	callID := <-waiting
	// docs/guides/workflow-streams.md's recipe: the temporal CLI polls the
	// stream of a running turn, and reads its offset.
	out, err := e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", wsPollUpdate,
		"--input", `{"topics":["events"],"from_offset":0}`, "--output", "json")
	require.NoError(t, err, out)
	cliEvents := cliPollEvents(t, out)
	require.NotEmpty(t, cliEvents)
	require.Equal(t, agent.StreamRunning, cliEvents[0].Status)
	require.Contains(t, kinds(cliEvents), agent.EventApprovalRequired)
	out, err = e.Temporal("workflow", "query", "--workflow-id", id, "--name", wsOffsetQuery, "--output", "json")
	require.NoError(t, err, out)
	require.Contains(t, out, "queryResult")

	_, err = turnclient.Approve(ctx, e.Client(), id, agent.ApprovalDecision{CallID: callID, Approved: true, Approver: "test"})
	require.NoError(t, err)
	g := <-grpcDone
	require.NoError(t, g.err)
	wait()
	farDone.Wait()

	polled := e.requireSameStream(ctx, id, g.events, subs, text)
	require.Equal(t, asGRPCAll(cliEvents), g.events[:len(cliEvents)], "the CLI's poll is the stream so far")
	require.Equal(t, []string{"The result is 50."}, wsText(t, subs[0].got.items))
	require.Equal(t, agent.StreamCompleted, polled[len(polled)-1].Status)
	requireDrained(t, far, int64(len(subs[0].got.items)))
	e.replay(id, "turn_workflow_streams")
}

// TestWorkflowStreamsRetriedStream: a model call cut half way and tried
// again is exact on the poll as on gRPC: the events topic carries the
// failed attempt's tokens and the RETRYING status that voids them, as
// gRPC does, and the text topic only the reply's final text.
func TestWorkflowStreamsRetriedStream(t *testing.T) {
	e := newStreamsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "ws-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	// Subscribers join after the start: the turn answers their polls
	// for a window, as Temporal's clients following a short turn ask.
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "cut a story", StreamWindowSec: subscriberWindow}})
	require.NoError(t, err)
	first, err := s.Recv()
	require.NoError(t, err)
	subs, text, wait := e.subscribe(ctx, id, 0, 3, 10, 18)
	rest, err := recvAll(s, nil)
	require.NoError(t, err)
	wait()
	grpcEvents := append([]agent.Event{gateway.FromPBEvent(first)}, rest...)

	polled := e.requireSameStream(ctx, id, grpcEvents, subs, text)
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")
	var retrying []agent.Event
	for _, ev := range polled {
		if ev.Status == agent.StreamRetrying {
			retrying = append(retrying, ev)
		}
	}
	require.Len(t, retrying, 1)
	require.Less(t, retrying[0].VoidFrom, retrying[0].Index, "the failed attempt streamed text, voided")
	require.Equal(t, []string{storyText}, wsText(t, subs[0].got.items), "no voided text on the text topic")
	require.Equal(t, storyText, agent.ReplayText(polled))
}

// cliPollEvents decodes the events of a poll's result as the temporal CLI
// prints it with --output json.
func cliPollEvents(t *testing.T, out string) []agent.Event {
	t.Helper()
	var printed struct {
		Result wsPollResult `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
	var items []wsItem
	for _, it := range printed.Result.Items {
		b, err := base64.StdEncoding.DecodeString(it.Data)
		require.NoError(t, err)
		p := &commonpb.Payload{}
		require.NoError(t, proto.Unmarshal(b, p))
		items = append(items, wsItem{Topic: it.Topic, Offset: it.Offset, Payload: p})
	}
	return wsEvents(t, items)
}

func kinds(evs []agent.Event) []agent.EventKind {
	var out []agent.EventKind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// TestWorkflowStreamsWindow: short turns (one reply, no tool: done in a few
// hundred milliseconds), started with a window for subscribers
// (stream_window_sec) the way Temporal's clients start them (the first with
// the temporal CLI, as docs/guides/workflow-streams.md shows), and followed by
// subscribers that start with the turn, just after it, and well after its
// final status: each gets every item, in order, through the final status, with
// no error; the workflow's result is the turn's answer.
func TestWorkflowStreamsWindow(t *testing.T) {
	e := newStreamsEnvWith(t, testScript)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var turns sync.WaitGroup
	ids := make([]string, 3)
	for i := range ids {
		job := "ws-window-" + testserver.RandomID()
		ids[i] = contract.TurnWorkflowID("demo", job)
		turns.Go(func() {
			req := agent.TurnRequest{TenantID: "demo", JobID: job, Prompt: "hello", StreamWindowSec: 5}
			var run client.WorkflowRun
			if i == 0 {
				// docs/guides/workflow-streams.md's recipe.
				in, _ := json.Marshal(req)
				out, err := e.Temporal("workflow", "start", "--type", contract.AgentTurn, "--task-queue", e.TaskQueue,
					"--workflow-id", ids[i], "--input", string(in))
				if !assert.NoError(t, err, out) {
					return
				}
				run = e.Client().GetWorkflow(ctx, ids[i], "")
			} else {
				var err error
				run, err = e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
				if !assert.NoError(t, err) {
					return
				}
			}
			subs := make([]*subscription, 3)
			var wg sync.WaitGroup
			for j, after := range []time.Duration{0, 500 * time.Millisecond, 2 * time.Second} {
				subs[j] = &subscription{}
				wg.Go(func() {
					time.Sleep(after)
					subs[j].got, subs[j].err = wsSubscribe(ctx, e.Client(), ids[i], nil, 0)
				})
			}
			res, err := turnclient.Result(ctx, run)
			assert.NoError(t, err)
			assert.Equal(t, agent.StatusCompleted, res.Status)
			assert.Equal(t, "I don't know.", res.Output)
			wg.Wait()
			page, err := turnclient.Events(ctx, e.Client(), ids[i], agent.EventsQuery{})
			if !assert.NoError(t, err) {
				return
			}
			for j, s := range subs {
				if !assert.NoError(t, s.err, "turn %d, subscriber %d", i, j) {
					continue
				}
				t.Logf("turn %d, subscriber %d: %d items, ended by %v", i, j, len(s.got.items), s.got.end)
				for k, it := range s.got.items {
					assert.Equal(t, int64(k), it.Offset, "turn %d, subscriber %d", i, j)
				}
				assert.Equal(t, page.Events, wsEvents(t, s.got.items), "turn %d, subscriber %d: the events topic is the log", i, j)
				assert.Equal(t, []string{"I don't know."}, wsText(t, s.got.items), "turn %d, subscriber %d", i, j)
			}
		})
	}
	turns.Wait()
	e.replay(ids[0], "turn_workflow_streams_window")
}

// TestWorkflowStreamsWindowInvoke: a short turn started through gRPC's
// Invoke with a window for subscribers (stream_window_sec 60) answers
// Invoke with its stored result while the workflow still serves the
// window, and a subscriber started with the turn reads every item
// through the final status. The window holds the workflow's close only.
func TestWorkflowStreamsWindowInvoke(t *testing.T) {
	e := newStreamsEnvWith(t, testScript)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := "ws-invoke-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	sub := make(chan subscription, 1)
	go func() {
		var s subscription
		// The subscriber starts as soon as the turn exists.
		for {
			_, err := e.Client().DescribeWorkflowExecution(ctx, id, "")
			var nf *serviceerror.NotFound
			if !errors.As(err, &nf) || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.got, s.err = wsFollow(ctx, e.Client(), id, nil, 0, func(items []wsItem) bool {
			evs := wsEvents(t, items)
			return len(evs) > 0 && evs[len(evs)-1].Terminal()
		})
		sub <- s
	}()
	res, err := e.agents.Invoke(e.auth(ctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "hello", StreamWindowSec: 60}})
	require.NoError(t, err)
	require.Equal(t, "I don't know.", res.GetOutput())
	d, err := e.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(),
		"the workflow serves its window after Invoke has answered")

	s := <-sub
	require.NoError(t, s.err)
	page, err := turnclient.Events(ctx, e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, page.Events, wsEvents(t, s.got.items), "the events topic is the log")
	require.NoError(t, e.Client().TerminateWorkflow(ctx, id, "", "the test has what it needs"))
}

// TestWorkflowStreamsLateSubscriber: a subscriber whose first poll comes after
// the turn has closed (no window) gets no item: the server answers its poll
// "workflow execution already completed" and Temporal's clients, finding the
// run closed, end the subscription without an error. What
// docs/guides/workflow-streams.md tells it to do instead works: the offset
// query still counts the items, and the events query (as gRPC Resume) has the
// whole log through the final status.
func TestWorkflowStreamsLateSubscriber(t *testing.T) {
	e := newStreamsEnvWith(t, testScript)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := "ws-late-" + testserver.RandomID()
	req := agent.TurnRequest{TenantID: "demo", JobID: job, Prompt: "hello"}
	run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)

	got, err := wsSubscribe(ctx, e.Client(), run.GetID(), nil, 0)
	require.NoError(t, err, "the protocol's clients end a closed run's subscription cleanly")
	require.Empty(t, got.items)
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, got.end, &notFound, "the server's answer to a poll of a closed workflow")
	require.Contains(t, got.end.Error(), "workflow execution already completed")

	v, err := e.Client().QueryWorkflow(ctx, run.GetID(), "", wsOffsetQuery)
	require.NoError(t, err)
	var offset int64
	require.NoError(t, v.Get(&offset))
	page, err := turnclient.Events(ctx, e.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, int64(len(page.Events)+1), offset, "the offset query counts the events and the one text item")
	require.True(t, page.Events[len(page.Events)-1].Terminal())
	require.Equal(t, "I don't know.", agent.ReplayText(page.Events))
	require.Equal(t, asGRPCAll(page.Events), e.resume(ctx, run.GetID(), 0))
}

// TestWorkflowStreamsWindowPassed: a turn of local model calls, started
// with a window for subscribers that it outlasts (a story streamed for
// about 2.5 s against a window of 1 s), and a subscriber whose first poll
// comes once the model has the call, while a workflow task of the turn
// runs it. The poll reaches the turn only after that task (the call's
// hand-off, or on a quick machine its end); the turn takes one more task
// before it closes (Log.DrainStream) instead of closing in it, so the
// subscriber gets every item through the final status, where the close
// used to abort its poll. The history recorded as
// turn_workflow_streams_window_passed, a call that ended in its task,
// replays the drain of polls that came during the last task.
func TestWorkflowStreamsWindowPassed(t *testing.T) {
	catalog := strings.Replace(streamsCatalog, "    tools: [calculator]\n", "    tools: [calculator]\n    model_execution: local\n", 1)
	require.Contains(t, catalog, "model_execution: local")
	ts := testserver.Start(t, testserver.Options{Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 60", 1),
		Catalogs: []string{catalog}})
	e := &env{Server: ts, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "ws-passed-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	req := agent.TurnRequest{TenantID: "demo", JobID: job, Prompt: "tell a story", StreamWindowSec: 1}
	run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(t, err)
	// The call streams: the subscriber's first poll waits for its task.
	require.Eventually(t, func() bool { return len(e.Model.Requests()) == 1 }, time.Minute, 10*time.Millisecond)
	got, err := wsSubscribe(ctx, e.Client(), id, nil, 0)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, storyText, res.Output)

	page, err := turnclient.Events(ctx, e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, page.Events, wsEvents(t, got.items), "the subscriber's events topic is the log, through the final status")
	require.Equal(t, []string{storyText}, wsText(t, got.items))
	var timers []string // their summaries, as the Web UI shows them
	for _, ev := range e.history(id) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			timers = append(timers, string(ev.GetUserMetadata().GetSummary().GetData()))
		}
	}
	require.Len(t, timers, 2, "one more workflow task, past the window, before the close: %q", timers)
	require.Equal(t, `"turn timeout"`, timers[0])
	// Polls that came during the last task, or a subscriber reading along
	// (its poll answered at the hand-off): either way a task of its own.
	require.Contains(t, []string{`"Workflow Streams polls that came during the last task"`, `"Workflow Streams subscribers reading the end"`}, timers[1])
}
