package eventlog

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

const convID = "conv/demo/s1"

// tokens is a batch of a turn's streamed text, from index first.
func tokens(streamID string, first int64, words ...string) agent.TokenBatch {
	b := agent.TokenBatch{StreamID: streamID, Step: 1, Attempt: 1, First: first}
	for i, w := range words {
		b.Events = append(b.Events, agent.Event{StreamID: streamID, Index: first + int64(i), Kind: agent.EventToken, Text: w, Step: 1, Attempt: 1})
	}
	return b
}

// toolStart is a turn's forwarded tool_start, at index.
func toolStart(streamID string, index int64) agent.TokenBatch {
	e := agent.Event{StreamID: streamID, Index: index, Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c1", Name: "calculator"}}
	return agent.TokenBatch{StreamID: streamID, First: index, Events: []agent.Event{e}}
}

// TestMessageLog: a Conversation's log frames each message's turn with
// message_start and message_end, takes the running turn's batches as
// child events of the message — in the turn's order, each once — and
// refuses any other, and puts a completed answer on the text topic.
func TestMessageLog(t *testing.T) {
	const turn1, turn2 = "turn/demo/s1-1", "turn/demo/s1-2"
	l := New(convID)
	require.False(t, l.AcceptMessage(tokens(turn1, 3, "early")), "no message runs yet")
	start := l.StartMessage("s1-1", turn1, "")
	require.Equal(t, agent.Event{StreamID: convID, Index: 1, Kind: agent.EventMessageStart, Message: &agent.MessageEvent{ID: "s1-1", StreamID: turn1}}, start)

	tests := []struct {
		name  string
		batch agent.TokenBatch
		taken bool
	}{
		{"the turn's first tokens", tokens(turn1, 3, "Let", " me"), true},
		{"a repeat", tokens(turn1, 3, "Let", " me"), false},
		{"overlapping what was taken", tokens(turn1, 4, "me", " add"), false},
		{"after a gap (events the turn does not forward)", toolStart(turn1, 8), true},
		{"another turn's", tokens(turn2, 9, "x"), false},
		{"indices that skip", agent.TokenBatch{StreamID: turn1, First: 9, Events: []agent.Event{{Index: 9, Kind: agent.EventToken, Text: "a"}, {Index: 11, Kind: agent.EventToken, Text: "b"}}}, false},
		{"empty", agent.TokenBatch{StreamID: turn1, First: 9}, false},
		{"the next tokens", tokens(turn1, 9, "The", " answer"), true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.taken, l.AcceptMessage(tt.batch), tt.name)
	}
	end := l.EndMessage(agent.StatusCompleted, "The answer", "")
	require.Equal(t, &agent.MessageEvent{ID: "s1-1", StreamID: turn1, Status: agent.StatusCompleted}, end.Message)
	require.False(t, l.AcceptMessage(tokens(turn1, 20, "late")), "the message has ended")

	l.StartMessage("s1-2", turn2, "")
	require.True(t, l.AcceptMessage(tokens(turn2, 2, "no")))
	l.EndMessage(agent.StatusFailed, "ignored: the turn failed", "")
	l.StartMessage("s1-3", "turn/demo/s1-3", "")
	l.EndMessage("weird", "", "")

	page := l.Page(agent.EventsQuery{})
	var got []string
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Index, "the conversation's own indices, without gaps")
		require.Equal(t, convID, e.StreamID)
		require.NoError(t, e.Validate(), "%s", e)
		s := string(e.Kind)
		if e.Child != nil {
			s = fmt.Sprintf("%s/%s#%d %s", e.Child.CallID, e.Child.StreamID, e.Child.Index, s)
		}
		if e.Message != nil {
			s += " " + e.Message.ID + " " + e.Message.Status
		}
		got = append(got, s)
	}
	require.Equal(t, []string{
		"message_start s1-1 ",
		"s1-1/turn/demo/s1-1#3 token", "s1-1/turn/demo/s1-1#4 token",
		"s1-1/turn/demo/s1-1#8 tool_start",
		"s1-1/turn/demo/s1-1#9 token", "s1-1/turn/demo/s1-1#10 token",
		"message_end s1-1 completed",
		"message_start s1-2 ", "s1-2/turn/demo/s1-2#2 token", "message_end s1-2 failed",
		"message_start s1-3 ", "message_end s1-3 failed",
	}, got)
	require.Equal(t, "Let meThe answer", agent.ReplayText(agent.ChildEvents(page.Events, "s1-1")))
	require.Empty(t, agent.ReplayText(page.Events), "the turns' text is not the conversation's own")
	require.False(t, page.Done, "a conversation's stream has no end")

	res, err := l.page(PollInput{Topics: []string{contract.StreamTopicText}})
	require.NoError(t, err)
	require.Len(t, res.Items, 1, "a failed turn's output is not an answer")
	var text string
	decodeItem(t, res.Items[0], &text)
	require.Equal(t, "The answer", text)
	require.Equal(t, int64(6), res.Items[0].Offset, "after the turn's events, before its message_end")
}

// conversationLog is a log of n messages of one token event each, and an
// answer each.
func conversationLog(n int) *Log {
	l := New(convID)
	for i := range n {
		turn := contract.TurnWorkflowID("demo", fmt.Sprintf("s1-%d", i))
		l.StartMessage("m", turn, "")
		l.AcceptMessage(tokens(turn, 2, strings.Repeat("w", 100)))
		l.EndMessage(agent.StatusCompleted, strings.Repeat("w", 100), "")
	}
	return l
}

// TestCarry: a run hands on the log's last items within the budget, and
// the next run's log (Restore) is the same stream from there: the same
// items at the same offsets, byte for byte, the same next offset and
// index, and it goes on from them.
func TestCarry(t *testing.T) {
	l := conversationLog(40) // 160 items
	all, err := l.page(PollInput{})
	require.NoError(t, err)

	for _, budget := range []int{0, 100, 2_000, CarryBytes, 10 << 20} {
		s, err := l.Carry(budget)
		require.NoError(t, err)
		require.NotNil(t, s.Log, `"log":[] on the wire, never null`)
		require.Equal(t, l.Next(), s.NextIndex)
		require.Equal(t, l.Offset(), s.BaseOffset+int64(len(s.Log)))
		size := 0
		for _, it := range s.Log {
			size += len(it.Data) + len(it.Topic)
			require.Zero(t, it.Offset, "written as 0, as Temporal's packages write it")
		}
		require.LessOrEqual(t, size, budget)
		if budget >= 10<<20 {
			require.Len(t, s.Log, len(all.Items), "everything fits")
		}
		if budget == CarryBytes {
			raw, err := json.Marshal(s)
			require.NoError(t, err)
			require.Less(t, len(raw), CarryBytes+8<<10, "the carried state's JSON stays near the budget")
		}

		r, err := Restore(convID, s)
		require.NoError(t, err)
		require.Equal(t, l.Offset(), r.Offset())
		require.Equal(t, l.Next(), r.Next())
		got, err := r.page(PollInput{FromOffset: s.BaseOffset})
		require.NoError(t, err)
		want, err := l.page(PollInput{FromOffset: s.BaseOffset})
		require.NoError(t, err)
		if s.BaseOffset == l.Offset() {
			require.Empty(t, got.Items)
		} else {
			require.Equal(t, want, got, "budget %d", budget)
		}

		// The next run goes on where this one stopped.
		next := r.StartMessage("m2", "turn/demo/s1-z", "")
		require.Equal(t, l.Next(), next.Index)
		after, err := r.page(PollInput{FromOffset: l.Offset()})
		require.NoError(t, err)
		require.Len(t, after.Items, 1)
		require.Equal(t, l.Offset(), after.Items[0].Offset)
		again, err := r.Carry(budget)
		require.NoError(t, err)
		require.Equal(t, l.Offset()+1, again.BaseOffset+int64(len(again.Log)))
	}

	empty, err := New(convID).Carry(CarryBytes)
	require.NoError(t, err)
	require.Equal(t, agent.StreamState{Log: []agent.StreamItem{}, BaseOffset: 0, NextIndex: 1}, empty)
}

func ptr[T any](v T) *T { return &v }

// TestCarryWhatSubscribersRead: once a subscriber has polled, a run hands
// on every item from where it had read, though more than the tail, so
// that its next poll reaches the next run without TruncatedOffset; items
// from there of more than ReadCarryBytes are cut to the tail as before.
// The next run carries where it had read on.
func TestCarryWhatSubscribersRead(t *testing.T) {
	l := conversationLog(40) // 160 items
	tail, err := l.Carry(2_000)
	require.NoError(t, err)
	require.Nil(t, tail.ReadOffset, "no one polled")

	l.ReadTo(-5) // a poll that fails as truncated reads nothing
	l.ReadTo(10)
	l.ReadTo(4) // the furthest is kept
	s, err := l.Carry(2_000)
	require.NoError(t, err)
	require.Equal(t, int64(10), s.BaseOffset, "from where the subscriber had read")
	require.Equal(t, ptr(int64(10)), s.ReadOffset)
	require.Less(t, s.BaseOffset, tail.BaseOffset, "more than the tail")

	r, err := Restore(convID, s)
	require.NoError(t, err)
	got, err := r.page(PollInput{FromOffset: 10})
	require.NoError(t, err)
	want, err := l.page(PollInput{FromOffset: 10})
	require.NoError(t, err)
	require.Equal(t, want, got, "the subscriber's next poll reads the next run as it would have read this one")
	again, err := r.Carry(2_000)
	require.NoError(t, err)
	require.Equal(t, int64(10), again.BaseOffset, "no poll reached the next run: it keeps what is unread")

	r.ReadTo(r.Offset() + 100) // within the stream
	end, err := r.Carry(2_000)
	require.NoError(t, err)
	require.Equal(t, tail.BaseOffset, end.BaseOffset, "read to the end: the tail")
	require.Equal(t, ptr(r.Offset()), end.ReadOffset)

	big := conversationLog(40 * ReadCarryBytes / CarryBytes * 4)
	big.ReadTo(0)
	cut, err := big.Carry(CarryBytes)
	require.NoError(t, err)
	only, err := conversationLog(40 * ReadCarryBytes / CarryBytes * 4).Carry(CarryBytes)
	require.NoError(t, err)
	require.Equal(t, only.BaseOffset, cut.BaseOffset, "more than ReadCarryBytes unread: the tail")
}

func wireData(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	b, err := proto.Marshal(p)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func jsonPayload(data string) *commonpb.Payload {
	return &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(data)}
}

// TestRestoreRefuses: a carried state that is not what Carry makes is
// refused, saying what is wrong.
func TestRestoreRefuses(t *testing.T) {
	good, err := conversationLog(2).Carry(CarryBytes)
	require.NoError(t, err)
	_, err = Restore(convID, good)
	require.NoError(t, err)
	event := func(stream string, index int64) agent.StreamItem {
		return agent.StreamItem{Topic: "events", Data: wireData(t, jsonPayload(`{"stream_id":"`+stream+`","event_index":`+strconv.FormatInt(index, 10)+`,"kind":"token","text":"x"}`))}
	}
	tests := []struct {
		name  string
		state agent.StreamState
		want  string
	}{
		{"negative base", agent.StreamState{BaseOffset: -1, NextIndex: 1}, "stream.base_offset -1: want 0 to 2^53"},
		{"no next index", agent.StreamState{}, "stream.next_index 0: want 1 to 2^53"},
		{"negative read offset", agent.StreamState{NextIndex: 1, ReadOffset: ptr(int64(-1))}, "stream.read_offset -1: want 0 to 2^53"},
		{"not base64", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "text", Data: "%%"}}}, "stream.log[0]: data is not standard base64"},
		{"not a payload", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "text", Data: base64.StdEncoding.EncodeToString([]byte{0xff, 0xff})}}}, "not a protobuf Payload"},
		{"not JSON", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "text", Data: wireData(t, &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}})}}}, `payload encoding "binary/plain": want json/plain`},
		{"unknown topic", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "reasoning", Data: wireData(t, jsonPayload(`"x"`))}}}, `topic "reasoning": want "events" or "text"`},
		{"text not a string", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "text", Data: wireData(t, jsonPayload(`{}`))}}}, "a text item must be a JSON string"},
		{"event not an object", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "events", Data: wireData(t, jsonPayload(`[1]`))}}}, "the JSON of an event object"},
		{"event without an index", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "events", Data: wireData(t, jsonPayload(`{"kind":"token"}`))}}}, "a kind and an event_index from 1"},
		{"event of another stream", agent.StreamState{NextIndex: 2, Log: []agent.StreamItem{event("conv/demo/other", 1)}}, `an event of stream "conv/demo/other"`},
		{"events out of order", agent.StreamState{NextIndex: 5, Log: []agent.StreamItem{event(convID, 2), event(convID, 4)}}, "event_index 4 does not follow 2"},
		{"next index behind the events", agent.StreamState{NextIndex: 3, Log: []agent.StreamItem{event(convID, 3)}}, "stream.next_index 3 does not follow the last event's index 3"},
		{"fewer indices than events", agent.StreamState{NextIndex: 1, Log: []agent.StreamItem{{Topic: "text", Data: wireData(t, jsonPayload(`"x"`))}, event(convID, 0)}}, "a kind and an event_index from 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Restore(convID, tt.state)
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// carriedWorkflow serves the stream of a log its previous run handed on:
// "append" logs a message; "detach" detaches the pollers and waits for
// the handlers, as a run does before it continues as new; it returns on
// "close".
func carriedWorkflow(ctx workflow.Context, s agent.StreamState) error {
	l, err := Restore(convID, s)
	if err != nil {
		return err
	}
	if err := l.ServeStream(ctx, func(workflow.Context) bool { return true }); err != nil {
		return err
	}
	add := workflow.GetSignalChannel(ctx, "append")
	done := workflow.GetSignalChannel(ctx, "detach")
	for closed := false; !closed; {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(add, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			l.StartMessage("m", "turn/demo/m", "")
		})
		sel.AddReceive(done, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			closed = true
		})
		sel.Select(ctx)
	}
	l.DetachPollers()
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "close").Receive(ctx, nil)
	return nil
}

// TestCarriedStreamServed: a run that took a log up answers polls at the
// offsets the previous run gave: from an offset it kept, the rest; from
// its end, the next item once there is one; from 0, what it kept (0 means
// "from the start of what there is"); from an offset before what it
// kept, TruncatedOffset. The offset query goes on from the previous
// run's. Detached, it answers the poll waiting and refuses new ones.
func TestCarriedStreamServed(t *testing.T) {
	l := conversationLog(40)
	s, err := l.Carry(2_000)
	require.NoError(t, err)
	require.Greater(t, s.BaseOffset, int64(1))
	end := l.Offset()

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(carriedWorkflow)
	var kept, fromEnd, fromZero, truncated, waiting, refused *polled
	env.RegisterDelayedCallback(func() {
		kept = poll(env, PollInput{Topics: []string{}, FromOffset: s.BaseOffset + 1})
		fromEnd = poll(env, PollInput{Topics: []string{}, FromOffset: end})
		fromZero = poll(env, PollInput{Topics: []string{"events"}})
		truncated = poll(env, PollInput{FromOffset: s.BaseOffset - 1})
		v, err := env.QueryWorkflow(contract.QueryStreamOffset)
		require.NoError(t, err)
		var offset int64
		require.NoError(t, v.Get(&offset))
		require.Equal(t, end, offset)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		require.False(t, fromEnd.completed, "nothing past the end yet")
		env.SignalWorkflow("append", nil)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		waiting = poll(env, PollInput{FromOffset: end + 1})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow("detach", nil)
	}, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		require.True(t, waiting.completed, "a poll waiting is answered when the run detaches its pollers")
		refused = poll(env, PollInput{FromOffset: end + 1})
		env.SignalWorkflow("close", nil)
	}, 5*time.Second)
	env.ExecuteWorkflow(carriedWorkflow, s)
	require.NoError(t, env.GetWorkflowError())

	want, err := l.page(PollInput{FromOffset: s.BaseOffset + 1})
	require.NoError(t, err)
	require.NoError(t, kept.err)
	require.Equal(t, want, kept.res)

	require.NoError(t, fromEnd.err)
	require.Equal(t, []int64{end}, offsetsOf(fromEnd.res.Items))
	var start agent.Event
	decodeItem(t, fromEnd.res.Items[0], &start)
	require.Equal(t, l.Next(), start.Index, "indices go on from the previous run's")

	require.NoError(t, fromZero.err)
	require.NotEmpty(t, fromZero.res.Items)
	require.GreaterOrEqual(t, fromZero.res.Items[0].Offset, s.BaseOffset, "0 is the start of what was kept")

	require.Equal(t, ErrTypeTruncatedOffset, errType(truncated.err))

	require.True(t, waiting.completed, "a poll waiting is answered when the run detaches its pollers")
	require.NoError(t, waiting.err)
	require.Empty(t, waiting.res.Items)
	require.Equal(t, end+1, waiting.res.NextOffset)
	require.Equal(t, ErrTypeStreamDraining, errType(refused.rejected))
}
