package chaos

import (
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// The door trials' readers must catch what they are there to catch: a
// reader that sees no flaw in a flawed stream passes every run.

func TestLogReader(t *testing.T) {
	tok := func(i int64, text string) agent.Event {
		return agent.Event{Index: i, Kind: agent.EventToken, Text: text}
	}
	content := func(i int64, text string) agent.Event {
		return agent.Event{Index: i, Kind: agent.EventContent, Content: []byte(`{"type":"text","text":"` + text + `"}`)}
	}
	done := func(i int64) agent.Event {
		return agent.Event{Index: i, Kind: agent.EventStatus, Status: agent.StreamCompleted}
	}

	t.Run("a retried call's voided tokens are not the answer", func(t *testing.T) {
		r := newLogReader()
		for _, e := range []agent.Event{tok(1, "wrong "), {Index: 2, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 1},
			tok(3, "right"), content(4, "right"), done(5)} {
			require.True(t, r.add(e))
		}
		require.True(t, r.ended())
		require.Equal(t, "right", r.text())
		require.Empty(t, r.flaws)
	})
	t.Run("a duplicate and a gap are flaws", func(t *testing.T) {
		r := newLogReader()
		require.True(t, r.add(tok(1, "a")))
		require.False(t, r.add(tok(1, "a")))
		require.False(t, r.add(tok(3, "c")))
		require.Len(t, r.flaws, 2)
	})
	t.Run("tokens that are not the content block are a flaw", func(t *testing.T) {
		r := newLogReader()
		for _, e := range []agent.Event{tok(1, "a"), content(2, "b"), done(3)} {
			r.add(e)
		}
		r.text()
		require.Len(t, r.flaws, 1)
	})
}

func TestA2ARead(t *testing.T) {
	text := func(s string) a2a.Part { return a2a.TextPart{Text: s} }
	status := func(id string) *a2a.TaskStatusUpdateEvent {
		return &a2a.TaskStatusUpdateEvent{Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: &a2a.Message{ID: id}}}
	}
	t.Run("a snapshot replaces what was read", func(t *testing.T) {
		r := &a2aRead{artifacts: map[a2a.ArtifactID][]a2a.Part{}, statuses: map[string]bool{}}
		r.apply(&a2a.Task{ID: "turn/chaos/j", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: &a2a.Message{ID: "m1"}}})
		r.apply(&a2a.TaskArtifactUpdateEvent{Artifact: &a2a.Artifact{ID: "answer", Parts: a2a.ContentParts{text("half")}}})
		// Resubscribed: the task as it is now.
		r.apply(&a2a.Task{ID: "turn/chaos/j", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: &a2a.Message{ID: "m1"}}})
		r.apply(&a2a.TaskArtifactUpdateEvent{Artifact: &a2a.Artifact{ID: "answer", Parts: a2a.ContentParts{text("whole")}}})
		r.apply(&a2a.TaskStatusUpdateEvent{Final: true, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
		require.True(t, r.final)
		require.Equal(t, "whole", r.answer())
		require.Empty(t, r.flaws)
	})
	t.Run("a status message twice and a part twice are flaws", func(t *testing.T) {
		r := &a2aRead{artifacts: map[a2a.ArtifactID][]a2a.Part{}, statuses: map[string]bool{}}
		r.apply(status("m1"))
		r.apply(status("m1"))
		r.apply(&a2a.TaskArtifactUpdateEvent{Artifact: &a2a.Artifact{ID: "answer", Parts: a2a.ContentParts{text("a")}}})
		r.apply(&a2a.TaskArtifactUpdateEvent{Append: true, Artifact: &a2a.Artifact{ID: "answer", Parts: a2a.ContentParts{text("a")}}})
		require.Equal(t, "aa", r.answer())
		require.Len(t, r.flaws, 2)
	})
}

func TestNodeRead(t *testing.T) {
	r, err := nodeRead{ID: "j", Text: "ab", Deltas: "ab", IDs: []string{"run j", "message m"}}.doorRead("s")
	require.NoError(t, err)
	require.Empty(t, r.flaws)
	require.Equal(t, doorRead{job: "j", session: "s", text: "ab"}, r)

	r, err = nodeRead{ID: "j", Text: "ab", Deltas: "aab", IDs: []string{"message m1", "message m2"}}.doorRead("s")
	require.NoError(t, err)
	require.Len(t, r.flaws, 2, "the deltas, and a second message")

	_, err = nodeRead{Failure: "the stream broke", Errors: []string{"terminated"}}.doorRead("s")
	require.ErrorContains(t, err, "terminated")
}
