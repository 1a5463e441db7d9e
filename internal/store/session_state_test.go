package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestSessionEnd: a session marked by a turn's end is inactive until its
// next turn's messages; one closed refuses every new turn at its start
// (Conflict, naming the job that closed it) while a turn begun before
// goes on, and stays closed by its first job whatever comes after.
func TestSessionEnd(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	state := func() store.SessionState {
		st, err := s.SessionState(ctx, "demo", "sess-1")
		require.NoError(t, err)
		return st
	}
	require.Equal(t, store.SessionState{State: store.SessionOpen}, state(), "a session never written to")

	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-e1")))
	require.NoError(t, s.EndSession(ctx, "demo", "sess-1", "job-e1", agent.SessionEndMark))
	require.NoError(t, s.EndSession(ctx, "demo", "sess-1", "job-e1", agent.SessionEndMark), "a retry")
	require.Equal(t, store.SessionState{State: store.SessionInactive, EndedBy: "job-e1"}, state())
	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-e2")), "a marked session takes turns")
	require.NoError(t, s.AppendSession(ctx, "demo", "sess-1", "job-e2", []agent.Message{{Role: agent.RoleUser, Content: "hi"}}))
	require.Equal(t, store.SessionOpen, state().State, "its next turn's messages open it again")

	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-e3")))
	require.NoError(t, s.EndSession(ctx, "demo", "sess-1", "job-e2", agent.SessionEndClose))
	require.NoError(t, s.EndSession(ctx, "demo", "sess-1", "job-e3", agent.SessionEndMark))
	require.Equal(t, store.SessionState{State: store.SessionClosed, EndedBy: "job-e2"}, state(), "closed by its first job")

	err := s.BeginTurn(ctx, demoTurn("job-e4"))
	requireCode(t, err, agent.CodeConflict)
	require.ErrorContains(t, err, `session "sess-1" was closed by job "job-e2"`)
	require.Zero(t, count(t, s, `SELECT count(*) FROM turns WHERE job_id = 'job-e4'`), "nothing stored")
	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-e3")), "a turn begun before the close goes on")

	other := demoTurn("job-e5")
	other.SessionID, other.Request.SessionID = "sess-2", "sess-2"
	require.NoError(t, s.BeginTurn(ctx, other), "another session is open")
	requireCode(t, s.EndSession(ctx, "demo", "sess-1", "job-e3", "delete"), agent.CodeInvalid)
}
