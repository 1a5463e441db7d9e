package eventlog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzTokenBatch: a tokens signal's batch, however malformed, either
// continues the log (its events get the next indices, in order, with the
// log's stream id, and no status but RETRYING enters from a batch) or
// leaves the log as it was; the same batch twice enters once. The events
// query then pages the log within its bounds.
func FuzzTokenBatch(f *testing.F) {
	for _, s := range []string{
		`{"stream_id":"turn/demo/j1","step":1,"attempt":1,"first":2,"events":[{"event_index":2,"kind":"token","text":"Hel"},{"event_index":3,"kind":"token","text":"lo"}]}`,
		`{"step":1,"attempt":2,"first":2,"events":[{"event_index":2,"kind":"status","status":"RETRYING","void_from":2}]}`,
		`{"step":1,"attempt":1,"first":2,"events":[{"event_index":2,"kind":"status","status":"COMPLETED"}]}`,
		`{"step":1,"attempt":0,"first":2,"events":[{"event_index":3,"kind":"token","text":"x"}]}`,
		`{"step":2,"attempt":1,"first":2,"events":[{"event_index":2,"kind":"token"}]}`,
		`{"step":1,"attempt":1,"first":2,"events":[]}`,
		`{"step":1,"first":-9223372036854775808,"events":[{"event_index":-9223372036854775808}]}`,
		`{"events":"x"}`, `null`,
	} {
		f.Add(s, int64(0), 0, false)
	}
	f.Add(`{"step":1,"attempt":1,"first":2,"events":[{"event_index":2,"kind":"token","text":"a"}]}`, int64(1), 1, false)
	f.Add(`{"step":1,"attempt":1,"first":2,"events":[{"event_index":2,"kind":"token","text":"a"}]}`, int64(-1), -1, true)
	f.Fuzz(func(t *testing.T, raw string, after int64, limit int, headOnly bool) {
		var b agent.TokenBatch
		if json.Unmarshal([]byte(raw), &b) != nil {
			return
		}
		l := New("turn/demo/j1")
		l.OpenStep(1)
		l.Append(agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
		before := len(l.events)

		if l.Accept(b) {
			require.Len(t, l.events, before+len(b.Events))
			require.NotEmpty(t, b.Events)
			for _, e := range l.events[before:] {
				require.False(t, e.Kind == agent.EventStatus && e.Status != agent.StreamRetrying, "status %s from a batch", e.Status)
			}
			require.False(t, l.Accept(b), "a repeated batch enters once")
		} else {
			require.Len(t, l.events, before)
		}
		for i, e := range l.events {
			require.Equal(t, int64(i+1), e.Index)
			require.Equal(t, l.streamID, e.StreamID)
		}

		p := l.Page(agent.EventsQuery{AfterIndex: after, Limit: limit, HeadOnly: headOnly})
		require.Equal(t, l.Next(), p.Next)
		if limit > 0 {
			require.LessOrEqual(t, len(p.Events), limit)
		}
		for i, e := range p.Events {
			require.Equal(t, after+int64(i)+1, e.Index)
		}
	})
}
