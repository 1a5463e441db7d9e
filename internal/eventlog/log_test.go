package eventlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func batch(step, attempt int, first int64, texts ...string) agent.TokenBatch {
	b := agent.TokenBatch{StreamID: "s", Step: step, Attempt: attempt, First: first}
	for i, s := range texts {
		b.Events = append(b.Events, agent.Event{Index: first + int64(i), Kind: agent.EventToken, Text: s})
	}
	return b
}

func TestLogFencing(t *testing.T) {
	l := New("s")
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // 1
	l.OpenStep(1)

	require.True(t, l.Accept(batch(1, 1, 2, "Hel")))
	require.False(t, l.Accept(batch(1, 1, 2, "Hel")), "a repeated batch")
	require.False(t, l.Accept(batch(1, 1, 4, "o")), "a gap")
	require.False(t, l.Accept(batch(2, 1, 3, "x")), "another step")
	require.True(t, l.Accept(batch(1, 1, 3, "lo")))

	retry := batch(1, 2, 4, "Hello")
	retry.Events = append([]agent.Event{{Index: 4, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2}}, retry.Events...)
	retry.Events[1].Index = 5
	require.True(t, l.Accept(retry))
	require.False(t, l.Accept(batch(1, 1, 6, "late")), "a late batch of the failed attempt")

	forged := batch(1, 2, 6, "x")
	forged.Events[0] = agent.Event{Index: 6, Kind: agent.EventStatus, Status: agent.StreamCompleted}
	require.False(t, l.Accept(forged), "batches cannot end the stream")
	require.Equal(t, 5, l.Dropped())

	require.Equal(t, int64(6), l.Next())
	require.Equal(t, "Hello", agent.ReplayText(l.events))
	for i, e := range l.events {
		require.Equal(t, int64(i+1), e.Index)
		require.Equal(t, "s", e.StreamID)
	}
	require.Equal(t, agent.StreamRunning, l.Status(), "RETRYING is not the turn's status")

	p := l.Page(agent.EventsQuery{AfterIndex: 3, Limit: 1})
	require.Len(t, p.Events, 1)
	require.Equal(t, int64(4), p.Events[0].Index)
	require.Equal(t, int64(6), p.Next)
	require.False(t, p.Done)
	require.Empty(t, l.Page(agent.EventsQuery{HeadOnly: true}).Events)
	require.Empty(t, l.Page(agent.EventsQuery{AfterIndex: 5}).Events)

	l.CloseStep()
	require.False(t, l.Accept(batch(1, 2, 6, "after")), "the call has ended")
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
	require.True(t, l.Page(agent.EventsQuery{}).Done)
	require.Equal(t, agent.StreamCompleted, l.Status())
}

// TestLogRefusesStaleBatches covers batches that arrive once their call
// has moved on. Attempts are counted per step (OpenStep resets the
// count), so only the step keeps a late batch of an earlier step's retry
// out of the next step's log.
func TestLogRefusesStaleBatches(t *testing.T) {
	// The log after step 1 (attempt 1 streamed "Hel", attempt 2 fenced it
	// off and streamed "Hello"), a tool event, and step 3's first batch.
	logAfterTwoCalls := func(t *testing.T) *Log {
		l := New("s")
		l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // 1
		l.OpenStep(1)
		require.True(t, l.Accept(batch(1, 1, 2, "Hel")))
		retry := batch(1, 2, 3, "", "Hello")
		retry.Events[0] = agent.Event{Index: 3, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2}
		require.True(t, l.Accept(retry))
		l.CloseStep()
		l.Append(agent.Event{Kind: agent.EventToolStart}) // 5
		l.OpenStep(3)
		require.True(t, l.Accept(batch(3, 1, 6, "Fine"))) // 6
		return l
	}
	internalGap := batch(3, 1, 7, "a", "b")
	internalGap.Events[1].Index = 9
	tests := []struct {
		name string
		b    agent.TokenBatch
	}{
		{"late batch of the earlier step's last attempt", batch(1, 2, 7, "late")},
		{"late batch of the earlier step's failed attempt", batch(1, 1, 7, "late")},
		{"empty batch", batch(3, 1, 7)},
		{"indices that skip inside the batch", internalGap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logAfterTwoCalls(t)
			require.False(t, l.Accept(tt.b))
			require.Equal(t, 1, l.Dropped())
			require.Equal(t, int64(7), l.Next())
			require.Equal(t, "HelloFine", agent.ReplayText(l.events))
			// The log still takes step 3's next batch.
			require.True(t, l.Accept(batch(3, 1, 7, "!")))
		})
	}
}

// TestLogAcceptsWhatModelsStream: a batch may carry reasoning and
// tool_args_delta events beside tokens, each of its kind's shape, and
// RETRYING voids them all; any other kind, a malformed event or one that
// claims to be a child's, makes the batch refused whole.
func TestLogAcceptsWhatModelsStream(t *testing.T) {
	delta := func(index int64, args string) agent.Event {
		return agent.Event{Index: index, Kind: agent.EventToolArgsDelta, Tool: &agent.ToolEvent{CallID: "c1", Name: "calculator", ArgsDelta: args}}
	}
	stream := func(first int64, evs ...agent.Event) agent.TokenBatch {
		return agent.TokenBatch{StreamID: "s", Step: 1, Attempt: 1, First: first, Events: evs}
	}
	refused := []struct {
		name string
		e    agent.Event
	}{
		{"a tool_start", agent.Event{Index: 2, Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c1", Name: "calculator"}}},
		{"a step_finish", agent.Event{Index: 2, Kind: agent.EventStepFinish, Step: 1, Usage: &agent.Usage{}, FinishReason: "stop"}},
		{"a custom event", agent.Event{Index: 2, Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "x", Value: []byte("1")}}},
		{"a delta without its call", agent.Event{Index: 2, Kind: agent.EventToolArgsDelta}},
		{"a delta with complete args", agent.Event{Index: 2, Kind: agent.EventToolArgsDelta, Tool: &agent.ToolEvent{CallID: "c1", Name: "calculator", Args: []byte("{}")}}},
		{"reasoning without text", agent.Event{Index: 2, Kind: agent.EventReasoning}},
		{"a child's token", agent.Event{Index: 2, Kind: agent.EventToken, Text: "x", Child: &agent.ChildEvent{CallID: "c", StreamID: "turn/demo/c", Index: 1}}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			l := New("s")
			l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
			l.OpenStep(1)
			require.False(t, l.Accept(stream(2, agent.Event{Index: 2, Kind: agent.EventToken, Text: "ok"}, func() agent.Event { e := tt.e; e.Index = 3; return e }())))
			require.Equal(t, int64(2), l.Next())
		})
	}

	l := New("s")
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // 1
	l.OpenStep(1)
	require.True(t, l.Accept(stream(2, agent.Event{Index: 2, Kind: agent.EventReasoning, Text: "hmm"}, agent.Event{Index: 3, Kind: agent.EventToken, Text: "Hel"}, delta(4, ""))))
	retry := stream(5, agent.Event{Index: 5, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2},
		agent.Event{Index: 6, Kind: agent.EventReasoning, Text: "so"}, agent.Event{Index: 7, Kind: agent.EventToken, Text: "Hello"}, delta(8, `{"a":1}`))
	retry.Attempt = 2
	require.True(t, l.Accept(retry))
	require.Equal(t, "Hello", agent.ReplayText(l.events))
	require.Equal(t, "so", agent.ReplayReasoning(l.events))
	var args []string
	for _, e := range agent.Unvoided(l.events) {
		if e.Kind == agent.EventToolArgsDelta {
			args = append(args, e.Tool.ArgsDelta)
		}
	}
	require.Equal(t, []string{`{"a":1}`}, args, "the failed attempt's deltas are void")
}

// TestLogAppendChild: a child's batch enters as child events of its call,
// at the log's own indices, keeping the child's stream and indices.
func TestLogAppendChild(t *testing.T) {
	l := New("turn/demo/parent")
	l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	child := agent.TokenBatch{StreamID: "turn/demo/child", First: 4, Events: []agent.Event{
		{StreamID: "turn/demo/child", Index: 4, Kind: agent.EventToken, Text: "hi"},
		{StreamID: "turn/demo/child", Index: 5, Kind: agent.EventStatus, Status: agent.StreamCompleted},
	}}
	l.AppendChild(child, "call-1")
	require.Equal(t, int64(4), l.Next())
	for i, e := range l.events[1:] {
		require.Equal(t, int64(i+2), e.Index)
		require.Equal(t, "turn/demo/parent", e.StreamID)
		require.Equal(t, &agent.ChildEvent{CallID: "call-1", StreamID: "turn/demo/child", Index: int64(4 + i)}, e.Child)
	}
	require.False(t, l.Done(), "a child's end is not the turn's")
	require.Equal(t, agent.StreamRunning, l.Status())
	require.Empty(t, agent.ReplayText(l.events), "a child's text is not the turn's")
}

// HandOn gives the next activity the events logged since the last
// hand-on, counts batches CallModel published as handed, and asks for a
// wake-up instead when the events are too large to travel in an input,
// or when the turn is not streamed.
func TestHandOn(t *testing.T) {
	streamed := New("s")
	require.Empty(t, streamed.HandOn(true).Events, "nothing logged yet")

	streamed.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	require.Equal(t, []int64{1}, indices(streamed.Unhanded(true).Events))
	require.Equal(t, []int64{1}, indices(streamed.Unhanded(true).Events), "Unhanded marks nothing handed")
	live := streamed.HandOn(true)
	require.False(t, live.Wake)
	require.Len(t, live.Events, 1)
	require.Equal(t, int64(1), live.Events[0].Index)
	require.Empty(t, streamed.HandOn(true).Events, "handed on once")

	// A batch CallModel published is not handed on again; one after a gap is.
	streamed.OpenStep(1)
	streamed.acceptSignalled(nil, batch(1, 1, 2, "a"))
	require.Empty(t, streamed.HandOn(true).Events)
	streamed.Append(agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 3}})
	require.Equal(t, []int64{3}, indices(streamed.HandOn(true).Events))

	// A call's last batch, taken with its result, is handed on with the
	// next activity: CallModel did not publish it.
	streamed.OpenStep(2)
	streamed.AcceptTail(nil, &agent.TokenBatch{StreamID: "s", Step: 2, Attempt: 1, First: 4,
		Events: []agent.Event{{Index: 4, Kind: agent.EventToken, Text: "b"}}}, 0)
	require.Equal(t, []int64{4}, indices(streamed.HandOn(true).Events))

	// A live-first call published what it streamed, all but its last
	// batch: the next activity hands on that batch and what follows.
	streamed.OpenStep(3)
	streamed.AcceptTail(nil, &agent.TokenBatch{StreamID: "s", Step: 3, Attempt: 1, First: 5,
		Events: []agent.Event{{Index: 5, Kind: agent.EventToken, Text: "c"}, {Index: 6, Kind: agent.EventToken, Text: "d"}}}, 5)
	streamed.Append(agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 3}})
	require.Equal(t, []int64{6, 7}, indices(streamed.HandOn(true).Events))

	big := strings.Repeat("x", MaxLiveBytes)
	streamed.Append(agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c", Name: "t", Args: []byte(`"` + big + `"`)}})
	require.Equal(t, contract.Live{Wake: true}, streamed.HandOn(true), "too large to hand on")

	unstreamed := New("s")
	unstreamed.Append(agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c", Name: "t"}})
	require.Equal(t, contract.Live{Wake: true}, unstreamed.HandOn(false))
}

func indices(evs []agent.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Index)
	}
	return out
}
