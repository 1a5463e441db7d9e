package workflows

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

func TestEventLogFencing(t *testing.T) {
	l := &eventLog{streamID: "s"}
	l.add(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // 1
	l.step = 1

	require.True(t, l.accept(batch(1, 1, 2, "Hel")))
	require.False(t, l.accept(batch(1, 1, 2, "Hel")), "a repeated batch")
	require.False(t, l.accept(batch(1, 1, 4, "o")), "a gap")
	require.False(t, l.accept(batch(2, 1, 3, "x")), "another step")
	require.True(t, l.accept(batch(1, 1, 3, "lo")))

	retry := batch(1, 2, 4, "Hello")
	retry.Events = append([]agent.Event{{Index: 4, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2}}, retry.Events...)
	retry.Events[1].Index = 5
	require.True(t, l.accept(retry))
	require.False(t, l.accept(batch(1, 1, 6, "late")), "a late batch of the failed attempt")

	forged := batch(1, 2, 6, "x")
	forged.Events[0] = agent.Event{Index: 6, Kind: agent.EventStatus, Status: agent.StreamCompleted}
	require.False(t, l.accept(forged), "batches cannot end the stream")

	require.Equal(t, int64(6), l.next())
	require.Equal(t, "Hello", agent.ReplayText(l.events))
	for i, e := range l.events {
		require.Equal(t, int64(i+1), e.Index)
		require.Equal(t, "s", e.StreamID)
	}

	p := l.page(agent.EventsQuery{AfterIndex: 3, Limit: 1})
	require.Len(t, p.Events, 1)
	require.Equal(t, int64(4), p.Events[0].Index)
	require.Equal(t, int64(6), p.Next)
	require.False(t, p.Done)
	require.Empty(t, l.page(agent.EventsQuery{HeadOnly: true}).Events)
	require.Empty(t, l.page(agent.EventsQuery{AfterIndex: 5}).Events)

	l.add(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
	require.True(t, l.page(agent.EventsQuery{}).Done)
}

// TestEventLogRefusesStaleBatches covers batches that arrive once their
// call has moved on. Attempts are counted per step (callModel resets the
// count), so only the step keeps a late batch of an earlier step's retry
// out of the next step's log.
func TestEventLogRefusesStaleBatches(t *testing.T) {
	// The log after step 1 (attempt 1 streamed "Hel", attempt 2 fenced it
	// off and streamed "Hello"), a tool event, and step 3's first batch.
	logAfterTwoCalls := func(t *testing.T) *eventLog {
		l := &eventLog{streamID: "s"}
		l.add(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}) // 1
		l.step, l.attempt = 1, 0
		require.True(t, l.accept(batch(1, 1, 2, "Hel")))
		retry := batch(1, 2, 3, "", "Hello")
		retry.Events[0] = agent.Event{Index: 3, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2}
		require.True(t, l.accept(retry))
		l.step = 0
		l.add(agent.Event{Kind: agent.EventToolStart}) // 5
		l.step, l.attempt = 3, 0
		require.True(t, l.accept(batch(3, 1, 6, "Fine"))) // 6
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
			require.False(t, l.accept(tt.b))
			require.Equal(t, 1, l.dropped)
			require.Equal(t, int64(7), l.next())
			require.Equal(t, "HelloFine", agent.ReplayText(l.events))
			// The log still takes step 3's next batch.
			require.True(t, l.accept(batch(3, 1, 7, "!")))
		})
	}
}

// handOn gives the next activity the events logged since the last
// hand-on, counts batches CallModel published as handed, and asks for a
// wake-up instead when the events are too large to travel in an input,
// or when the turn is not streamed.
func TestHandOn(t *testing.T) {
	streamed := &turn{} // a request streams unless it says not to
	streamed.log.streamID = "s"
	require.Empty(t, streamed.handOn().Events, "nothing logged yet")

	streamed.log.add(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	live := streamed.handOn()
	require.False(t, live.Wake)
	require.Len(t, live.Events, 1)
	require.Equal(t, int64(1), live.Events[0].Index)
	require.Empty(t, streamed.handOn().Events, "handed on once")

	// A batch CallModel published is not handed on again; one after a gap is.
	streamed.log.step, streamed.log.attempt = 1, 1
	streamed.acceptBatch(nil, batch(1, 1, 2, "a"))
	require.Empty(t, streamed.handOn().Events)
	streamed.log.add(agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 3}})
	require.Equal(t, []int64{3}, indices(streamed.handOn().Events))

	big := strings.Repeat("x", maxLiveBytes)
	streamed.log.add(agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c", Name: "t", Args: []byte(`"` + big + `"`)}})
	require.Equal(t, contract.Live{Wake: true}, streamed.handOn(), "too large to hand on")

	no := false
	unstreamed := &turn{req: agent.TurnRequest{Stream: &no}}
	unstreamed.log.add(agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c", Name: "t"}})
	require.Equal(t, contract.Live{Wake: true}, unstreamed.handOn())
}

func indices(evs []agent.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Index)
	}
	return out
}
