package eventlog

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// decodeItem reads an item's value as a subscriber does: base64, then a
// protobuf Payload, then its JSON.
func decodeItem(t *testing.T, it WireItem, v any) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(it.Data)
	require.NoError(t, err)
	var p commonpb.Payload
	require.NoError(t, proto.Unmarshal(b, &p))
	require.Equal(t, "json/plain", string(p.GetMetadata()["encoding"]))
	require.NoError(t, json.Unmarshal(p.GetData(), v))
}

// TestEncodeMatchesTheProtocol: an item's data is the standard base64 of
// the Payload the default converter makes, byte for byte as Temporal's
// packages pin it for "hello".
func TestEncodeMatchesTheProtocol(t *testing.T) {
	want := append([]byte{0x0a, 0x16, 0x0a, 0x08}, "encoding"...)
	want = append(want, 0x12, 0x0a)
	want = append(want, "json/plain"...)
	want = append(want, 0x12, 0x07)
	want = append(want, `"hello"`...)
	l := New("s")
	got, err := l.encode(entry{text: "hello"})
	require.NoError(t, err)
	require.Equal(t, base64.StdEncoding.EncodeToString(want), got)
}

// logWithText is a log of a turn that streamed "Hel", was retried and
// streamed "Hello", and completed: the text topic holds "Hello" once,
// after the step's events.
func logWithText() *Log {
	l := New("turn/demo/j")
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // offset 0
	l.OpenStep(1)
	l.Accept(batch(1, 1, 2, "Hel")) // 1
	retry := batch(1, 2, 3, "", "Hello")
	retry.Events[0] = agent.Event{Index: 3, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2}
	l.Accept(retry) // 2, 3
	l.CloseStep()
	l.AppendText("Hello")                                                              // 4
	l.Append(agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 5}}) // 5
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})      // 6
	return l
}

func TestStreamPage(t *testing.T) {
	l := logWithText()
	require.Equal(t, int64(7), l.Offset())
	tests := []struct {
		name    string
		in      PollInput
		offsets []int64
		topics  []string
	}{
		{"all topics from the start", PollInput{Topics: []string{}}, []int64{0, 1, 2, 3, 4, 5, 6}, nil},
		{"null topics are all topics", PollInput{}, []int64{0, 1, 2, 3, 4, 5, 6}, nil},
		{"events only: offsets are sparse", PollInput{Topics: []string{"events"}}, []int64{0, 1, 2, 3, 5, 6}, []string{"events"}},
		{"text only", PollInput{Topics: []string{"text"}}, []int64{4}, []string{"text"}},
		{"from an offset", PollInput{Topics: []string{"events", "text"}, FromOffset: 4}, []int64{4, 5, 6}, nil},
		{"a topic the turn has not", PollInput{Topics: []string{"reasoning"}}, nil, nil},
		{"from the end", PollInput{FromOffset: 7}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := l.page(tt.in)
			require.NoError(t, err)
			require.NotNil(t, res.Items, `"items":[] on the wire, never null`)
			require.Equal(t, int64(7), res.NextOffset, "a whole page ends at the stream's end")
			require.False(t, res.MoreReady)
			var offsets []int64
			for _, it := range res.Items {
				offsets = append(offsets, it.Offset)
				if tt.topics != nil {
					require.Contains(t, tt.topics, it.Topic)
				}
			}
			require.Equal(t, tt.offsets, offsets)
		})
	}

	res, err := l.page(PollInput{})
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"next_offset":7,"more_ready":false`)
	var got []agent.Event
	var text []string
	for _, it := range res.Items {
		switch it.Topic {
		case "events":
			var e agent.Event
			decodeItem(t, it, &e)
			got = append(got, e)
		case "text":
			var s string
			decodeItem(t, it, &s)
			text = append(text, s)
		}
	}
	require.Equal(t, l.events, got, "the events topic is the log, in order, each event as it marshals")
	require.Equal(t, []string{"Hello"}, text, "only the final text; Hel was voided")
	require.Equal(t, agent.ReplayText(got), strings.Join(text, ""))

	empty, err := json.Marshal(PollResult{Items: make([]WireItem, 0)})
	require.NoError(t, err)
	require.JSONEq(t, `{"items":[],"next_offset":0,"more_ready":false}`, string(empty))
}

// TestStreamPageBudget: a page stops before the item that would take it
// past 1,000,000 bytes of data and topics, says where to go on, and
// always holds at least one item.
func TestStreamPageBudget(t *testing.T) {
	l := New("turn/demo/j")
	big := strings.Repeat("x", 400_000) // about 533 KB of base64 each
	for range 3 {
		l.AppendText(big)
	}
	res, err := l.page(PollInput{})
	require.NoError(t, err)
	require.Len(t, res.Items, 1, "two would exceed the budget")
	require.True(t, res.MoreReady)
	require.Equal(t, int64(1), res.NextOffset)
	size := 0
	for _, it := range res.Items {
		size += len(it.Data) + len(it.Topic)
	}
	require.LessOrEqual(t, size, maxPollBytes)

	l.AppendText(strings.Repeat("y", 2_000_000))
	res, err = l.page(PollInput{FromOffset: 3})
	require.NoError(t, err)
	require.Len(t, res.Items, 1, "an item over the budget still goes, alone")
	require.Equal(t, int64(3), res.Items[0].Offset)
	require.Equal(t, int64(4), res.NextOffset)
	require.False(t, res.MoreReady)

	// A cut page's next offset is the first matching item left out.
	l = New("turn/demo/j")
	l.AppendText(big)
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	l.AppendText(big)
	l.AppendText(big)
	res, err = l.page(PollInput{Topics: []string{"text"}})
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(res.Items))
	require.Equal(t, int64(2), res.NextOffset)
	require.True(t, res.MoreReady)
}

func offsetsOf(items []WireItem) []int64 {
	var out []int64
	for _, it := range items {
		out = append(out, it.Offset)
	}
	return out
}

// streamWorkflow serves a log's stream: "append" signals log events, and
// "end" logs the terminal status and drains the stream, keeping it open
// until window after the start; it returns on "close", so that the test
// can poll a drained stream.
func streamWorkflow(ctx workflow.Context, serve bool, window time.Duration) error {
	start := workflow.Now(ctx)
	l := New("turn/demo/j")
	if err := l.Register(ctx, "demo"); err != nil {
		return err
	}
	if err := l.ServeStream(ctx, func(workflow.Context) bool { return serve }); err != nil {
		return err
	}
	add := workflow.GetSignalChannel(ctx, "append")
	end := workflow.GetSignalChannel(ctx, "end")
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(add, func(c workflow.ReceiveChannel, _ bool) {
		var text string
		c.Receive(ctx, &text)
		l.Append(agent.Event{Kind: agent.EventToken, Text: text})
	})
	sel.AddReceive(end, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		done = true
	})
	for !done {
		sel.Select(ctx)
	}
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
	l.DrainStream(ctx, start.Add(window), window > 0)
	drained := workflow.Now(ctx).Sub(start)
	if err := workflow.SetQueryHandler(ctx, "drained", func() (time.Duration, error) { return drained, nil }); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "close").Receive(ctx, nil)
	return nil
}

// polled is what a poll came to, in the test environment.
type polled struct {
	accepted, completed bool
	rejected            error
	res                 PollResult
	err                 error
}

func poll(env *testsuite.TestWorkflowEnvironment, in PollInput) *polled {
	p := &polled{}
	env.UpdateWorkflow(contract.UpdateStreamPoll, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { p.accepted = true },
		OnReject: func(err error) { p.rejected = err },
		OnComplete: func(v any, err error) {
			p.completed, p.err = true, err
			if err == nil {
				p.res = v.(PollResult)
			}
		},
	}, in)
	return p
}

func errType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// TestStreamServed: the poll update waits for items past its offset,
// answers at once when there are some, fails a negative offset with
// TruncatedOffset, and the offset query counts the items; a publish
// signal adds nothing. After the last event, polls are answered for
// StreamGrace; then the stream drains: a poll waiting is answered, and a
// poll after is answered at once (a turn's stream has no next run to
// send it to), before the workflow returns.
func TestStreamServed(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(streamWorkflow)

	var waiting, atOnce, negative, inFlight, late *polled
	env.RegisterDelayedCallback(func() {
		waiting = poll(env, PollInput{Topics: []string{"events"}})
		env.SignalWorkflow(contract.SignalStreamPublish, map[string]any{"items": []map[string]string{{"topic": "events", "data": "AA=="}}, "publisher_id": "x", "sequence": 1})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		require.True(t, waiting.accepted)
		require.False(t, waiting.completed, "nothing to read yet, and a publish adds nothing")
		env.SignalWorkflow("append", "a")
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		require.True(t, waiting.completed)
		require.Equal(t, []int64{0}, offsetsOf(waiting.res.Items))
		atOnce = poll(env, PollInput{FromOffset: 0})
		negative = poll(env, PollInput{FromOffset: -1})
		inFlight = poll(env, PollInput{FromOffset: 100})
		v, err := env.QueryWorkflow(contract.QueryStreamOffset)
		require.NoError(t, err)
		var offset int64
		require.NoError(t, v.Get(&offset))
		require.Equal(t, int64(1), offset)
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		require.True(t, atOnce.completed)
		require.Equal(t, []int64{0}, offsetsOf(atOnce.res.Items))
		require.Equal(t, ErrTypeTruncatedOffset, errType(negative.err))
		require.False(t, inFlight.completed)
		env.SignalWorkflow("end", nil)
	}, 4*time.Second)
	var inGrace *polled
	env.RegisterDelayedCallback(func() {
		require.False(t, inFlight.completed, "polls are answered as usual for StreamGrace after the end")
		inGrace = poll(env, PollInput{FromOffset: 1})
	}, 4*time.Second+StreamGrace/2)
	env.RegisterDelayedCallback(func() {
		require.True(t, inGrace.completed)
		require.Equal(t, []int64{1}, offsetsOf(inGrace.res.Items), "a subscriber between polls reads the final status")
		require.True(t, inFlight.completed, "a poll in flight is answered when the stream drains")
		late = poll(env, PollInput{FromOffset: 0})
		env.SignalWorkflow("close", nil)
	}, 4*time.Second+2*StreamGrace)
	env.ExecuteWorkflow(streamWorkflow, true, time.Duration(0))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.True(t, inFlight.completed, "a poll in flight is answered before the workflow returns")
	require.NoError(t, inFlight.err)
	require.Empty(t, inFlight.res.Items)
	require.Equal(t, int64(2), inFlight.res.NextOffset, "the end of the stream, holding the final status")
	require.False(t, inFlight.res.MoreReady)
	require.Nil(t, late.rejected)
	require.True(t, late.completed)
	require.Equal(t, []int64{0, 1}, offsetsOf(late.res.Items), "a poll that reaches the run once the stream has ended is answered at once, with all of it")
}

// TestStreamNotServed: a run its gate says does not serve the stream
// fails each poll, and still ends.
func TestStreamNotServed(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(streamWorkflow)
	var refused *polled
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow("append", "a")
		refused = poll(env, PollInput{})
		env.SignalWorkflow("end", nil)
		env.SignalWorkflow("close", nil)
	}, time.Second)
	env.ExecuteWorkflow(streamWorkflow, false, time.Duration(0))
	require.NoError(t, env.GetWorkflowError())
	require.True(t, refused.completed)
	require.Equal(t, "StreamUnsupported", errType(refused.err))
}

// TestStreamWindow: a run no one polled drains as soon as it ends, unless
// its window is open: then it drains once the window has passed, and a
// subscriber whose first poll comes after the end, within the window,
// reads every item.
func TestStreamWindow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		window, drain time.Duration
	}{{"no window", 0, time.Second}, {"window", 10 * time.Second, 10 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(streamWorkflow)
			var first *polled
			var drained time.Duration
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow("append", "a")
				env.SignalWorkflow("end", nil)
			}, time.Second)
			env.RegisterDelayedCallback(func() {
				first = poll(env, PollInput{})
			}, 5*time.Second)
			env.RegisterDelayedCallback(func() {
				v, err := env.QueryWorkflow("drained")
				require.NoError(t, err)
				require.NoError(t, v.Get(&drained))
				env.SignalWorkflow("close", nil)
			}, 20*time.Second)
			env.ExecuteWorkflow(streamWorkflow, true, tc.window)
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, tc.drain, drained, "when the run would close")
			require.True(t, first.completed)
			require.NoError(t, first.err)
			require.Equal(t, []int64{0, 1}, offsetsOf(first.res.Items))
		})
	}
}

// lastRunWorkflow is a turn's last run: it restores the stream handed
// on, logs the final status and drains, and reports how long that took.
func lastRunWorkflow(ctx workflow.Context, s agent.StreamState) (time.Duration, error) {
	start := workflow.Now(ctx)
	l, err := Restore("turn/demo/j", s)
	if err != nil {
		return 0, err
	}
	if err := l.Register(ctx, "demo"); err != nil {
		return 0, err
	}
	if err := l.ServeStream(ctx, func(workflow.Context) bool { return true }); err != nil {
		return 0, err
	}
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
	l.DrainStream(ctx, start, false)
	return workflow.Now(ctx).Sub(start), nil
}

// TestStreamCarriedSubscriber: a last run that a subscriber of the runs
// before has not reached waits for its poll (up to StreamCatchUp) and
// answers it with the end of the stream; a run no one polled before
// returns at once.
func TestStreamCarriedSubscriber(t *testing.T) {
	before := New("turn/demo/j")
	before.Append(agent.Event{Kind: agent.EventToken, Text: "a"})
	for _, tc := range []struct {
		name   string
		read   bool
		pollAt time.Duration // 0: no poll comes
		took   time.Duration
	}{
		{name: "no one polled", took: 0},
		{name: "the subscriber comes", read: true, pollAt: 3 * time.Second, took: 3*time.Second + StreamGrace},
		{name: "the subscriber never comes", read: true, took: StreamCatchUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := before.Carry(1 << 20)
			require.NoError(t, err)
			if tc.read {
				read := int64(1)
				s.ReadOffset = &read
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(lastRunWorkflow)
			var late *polled
			if tc.pollAt > 0 {
				env.RegisterDelayedCallback(func() { late = poll(env, PollInput{FromOffset: 1}) }, tc.pollAt)
			}
			env.ExecuteWorkflow(lastRunWorkflow, s)
			require.NoError(t, env.GetWorkflowError())
			var took time.Duration
			require.NoError(t, env.GetWorkflowResult(&took))
			require.Equal(t, tc.took, took)
			if late != nil {
				require.True(t, late.completed)
				require.NoError(t, late.err)
				require.Equal(t, []int64{1}, offsetsOf(late.res.Items), "the subscriber reads the final status")
			}
		})
	}
}
