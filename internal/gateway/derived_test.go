package gateway

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestClientIDs: a reserved id a request names is refused unless its
// door derived it; other ids pass.
func TestClientIDs(t *testing.T) {
	ctx := context.Background()
	job := agent.KeyedID(agent.ChannelMCP, []byte("session"), "1")
	require.NoError(t, clientIDs(ctx, "job_id", "job-1", "session_id", ""))
	err := clientIDs(ctx, "job_id", "job-1", "session_id", job)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, `session_id "`+job+`" begins with "af:"`)

	derived := WithDerived(ctx, job)
	require.NoError(t, clientIDs(derived, "job_id", job))
	other := agent.KeyedID(agent.ChannelMCP, []byte("session"), "2")
	require.Error(t, clientIDs(derived, "job_id", other), "only the ids the door derived")
	require.NoError(t, clientIDs(WithDerived(derived, other), "job_id", job, "session_id", other))
	require.Error(t, clientIDs(ctx, "job_id", job), "the parent context is unchanged")

	require.Equal(t, job, notifyID("turn/demo/"+job))
	require.Equal(t, "a/b", notifyID("turn/demo/a/b"))
	require.Empty(t, notifyID("wf-1"))
}

// TestOwnPerson: a person's session or turn is the staff's (admin or
// approver); a token with the user role alone is told it does not exist.
func TestOwnPerson(t *testing.T) {
	session := agent.DerivedID(agent.ChannelTelegram, "assistant", "tg", "1", "1")
	turn := "turn/demo/" + agent.KeyedID(agent.ChannelTelegram, []byte("s"), "1")
	mcp := "turn/demo/" + agent.KeyedID(agent.ChannelMCP, []byte("s"), "1")
	as := func(roles ...Role) context.Context {
		return context.WithValue(context.Background(), CallerKey{}, Token{Tenant: "demo", Name: "t", Roles: roles})
	}
	for _, tt := range []struct {
		roles []Role
		staff bool
	}{
		{[]Role{RoleUser}, false},
		{nil, false},
		{[]Role{RoleUser, RoleApprover}, true},
		{[]Role{RoleAdmin}, true},
	} {
		ctx := as(tt.roles...)
		require.Equal(t, tt.staff, CallerOf(ctx).Staff(), "%v", tt.roles)
		for _, err := range []error{ownPerson(ctx, "session", session), OwnStream(ctx, turn)} {
			if tt.staff {
				require.NoError(t, err)
			} else {
				require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v: %v", tt.roles, err)
			}
		}
		require.NoError(t, ownPerson(ctx, "session", "mine"))
		require.NoError(t, OwnStream(ctx, "turn/demo/job-1"))
		require.NoError(t, OwnStream(ctx, mcp), "an MCP call's turn is its caller's, not a person's")
		require.True(t, agent.IsCode(OwnStream(ctx, "turn/other/job-1"), agent.CodeNotFound))
	}
}

// TestVisibilityHidesPersons: a listing for a caller who is not staff
// leaves a person's turns out.
func TestVisibilityHidesPersons(t *testing.T) {
	q, err := TurnQuery{}.visibility("demo", "agentflow", true)
	require.NoError(t, err)
	require.Contains(t, q, "WorkflowId NOT STARTS_WITH 'turn/demo/af:telegram:'")
	q, err = TurnQuery{}.visibility("demo", "agentflow", false)
	require.NoError(t, err)
	require.NotContains(t, q, "NOT STARTS_WITH")
}
