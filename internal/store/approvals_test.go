package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestRecordApproval(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	first := agent.ApprovalRecord{
		TenantID: "demo", JobID: "job-a", CallID: "c1", Tool: "restart_service", Args: json.RawMessage(`{"name":"api"}`),
		Outcome: agent.ApprovalRejected, Reason: "not during the sale", Approver: "ana", Via: "update",
		RequestedAt: at, DecidedAt: at.Add(time.Minute),
	}
	require.NoError(t, s.RecordApproval(ctx, first))
	retry := first
	retry.Outcome, retry.Approver = agent.ApprovalApproved, "bob"
	require.NoError(t, s.RecordApproval(ctx, retry), "a retry is a no-op")
	second := first
	second.CallID, second.Outcome, second.Reason, second.Via = "c2", agent.ApprovalTimedOut, "", "timeout"
	second.DecidedAt = at.Add(time.Hour)
	require.NoError(t, s.RecordApproval(ctx, second))

	got, err := s.Approvals(ctx, "demo", "job-a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "ana", got[0].Approver, "the first decision stands")
	require.Equal(t, agent.ApprovalRejected, got[0].Outcome)
	require.JSONEq(t, `{"name":"api"}`, string(got[0].Args))
	require.True(t, got[0].DecidedAt.Equal(at.Add(time.Minute)))
	require.Equal(t, agent.ApprovalTimedOut, got[1].Outcome)

	other, err := s.Approvals(ctx, "other", "job-a")
	require.NoError(t, err)
	require.Empty(t, other, "tenants do not see each other's approvals")

	bad := first
	bad.Outcome = "maybe"
	require.True(t, agent.IsCode(s.RecordApproval(ctx, bad), agent.CodeInvalid))
	bad = first
	bad.Args = json.RawMessage(`{`)
	require.True(t, agent.IsCode(s.RecordApproval(ctx, bad), agent.CodeInvalid))
}

// TestApprovalsBoundToTheirCall: a call id the model uses again in a
// later step is another call, recorded apart under its approval id; a
// retry of either record changes nothing. The approver's issuer and
// subject are kept.
func TestApprovalsBoundToTheirCall(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	step2 := agent.ApprovalRecord{
		TenantID: "demo", JobID: "job-b", CallID: "call_1", Tool: "restart", Outcome: agent.ApprovalApproved, Approver: "aap",
		ApproverIssuer: "https://idp.example", ApproverSubject: "00u1", Via: "update", RequestedAt: at, DecidedAt: at.Add(time.Minute),
		ApprovalID: agent.ApprovalIDOf("run-1", 2, "call_1"),
	}
	step4 := step2
	step4.ApprovalID, step4.Outcome, step4.DecidedAt = agent.ApprovalIDOf("run-1", 4, "call_1"), agent.ApprovalRejected, at.Add(time.Hour)
	step4.ApproverIssuer, step4.ApproverSubject = agent.IssuerStaticToken, "aap"
	for _, r := range []agent.ApprovalRecord{step2, step4, step2, step4} {
		require.NoError(t, s.RecordApproval(ctx, r))
	}
	got, err := s.Approvals(ctx, "demo", "job-b")
	require.NoError(t, err)
	require.Len(t, got, 2, "two calls, one record each")
	require.Equal(t, []string{step2.ApprovalID, step4.ApprovalID}, []string{got[0].ApprovalID, got[1].ApprovalID})
	require.Equal(t, []string{"https://idp.example 00u1", agent.IssuerStaticToken + " aap"},
		[]string{got[0].ApproverIssuer + " " + got[0].ApproverSubject, got[1].ApproverIssuer + " " + got[1].ApproverSubject})
}

// TestGrants: an approval for the session stores its grant with it,
// once however often it is recorded. ActiveGrants finds the grants that
// may decide a call — of the session, or of the turn for a turn grant —
// and not those of another tenant, agent, tool or session, nor expired
// or revoked ones. ListGrants lists a session's; RevokeGrant records who
// revoked it and when, once, and refuses another tenant's.
func TestGrants(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	made := 0
	record := func(job, call, scope, session string, expires *time.Time, match agent.ArgsMatch) agent.Grant {
		made++
		apr := agent.ApprovalIDOf("run-"+job, 2, call)
		g := agent.Grant{ID: agent.GrantIDOf(apr), TenantID: "demo", Scope: scope, SessionID: session, JobID: job, AgentID: "ops",
			Tool: "restart", Match: match, CallID: call, ApprovalID: apr, Approver: "ana", ApproverIssuer: "https://idp.example",
			ApproverSubject: "00u1", Reason: "fine", CreatedAt: at.Add(time.Duration(made) * time.Millisecond), ExpiresAt: expires}
		r := agent.ApprovalRecord{TenantID: "demo", JobID: job, CallID: call, Tool: "restart", Outcome: agent.ApprovalApproved,
			Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at, ApprovalID: apr, GrantID: g.ID, Grant: &g}
		require.NoError(t, s.RecordApproval(ctx, r))
		require.NoError(t, s.RecordApproval(ctx, r), "a retry is a no-op")
		return g
	}
	api := agent.ArgsMatch{{Path: "/service", Equals: json.RawMessage(`"api"`)}}
	soon := at.Add(time.Hour)
	session := record("job-1", "c1", agent.ScopeSession, "s-1", nil, api)
	turn := record("job-1", "c2", agent.ScopeTurn, "s-1", nil, nil)
	expiring := record("job-1", "c3", agent.ScopeSession, "s-1", &soon, nil)
	otherSession := record("job-2", "c1", agent.ScopeSession, "s-2", nil, nil)

	ids := func(gs []agent.Grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	tests := []struct {
		name string
		q    agent.GrantQuery
		now  time.Time
		want []string
	}{
		{"the turn that made them", agent.GrantQuery{TenantID: "demo", AgentID: "ops", SessionID: "s-1", JobID: "job-1", Tools: []string{"restart"}},
			at, []string{session.ID, turn.ID, expiring.ID}},
		{"a later turn of the session", agent.GrantQuery{TenantID: "demo", AgentID: "ops", SessionID: "s-1", JobID: "job-3", Tools: []string{"restart"}},
			at, []string{session.ID, expiring.ID}},
		{"after one expired", agent.GrantQuery{TenantID: "demo", AgentID: "ops", SessionID: "s-1", JobID: "job-3", Tools: []string{"restart", "deploy"}},
			soon, []string{session.ID}},
		{"a turn without a session", agent.GrantQuery{TenantID: "demo", AgentID: "ops", JobID: "job-3", Tools: []string{"restart"}}, at, nil},
		{"another agent", agent.GrantQuery{TenantID: "demo", AgentID: "dev", SessionID: "s-1", JobID: "job-1", Tools: []string{"restart"}}, at, nil},
		{"another tool", agent.GrantQuery{TenantID: "demo", AgentID: "ops", SessionID: "s-1", JobID: "job-1", Tools: []string{"deploy"}}, at, nil},
		{"another tenant", agent.GrantQuery{TenantID: "rival", AgentID: "ops", SessionID: "s-1", JobID: "job-1", Tools: []string{"restart"}}, at, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ActiveGrants(ctx, tt.q, tt.now)
			require.NoError(t, err)
			require.Equal(t, tt.want, ids(got))
		})
	}
	got, err := s.ActiveGrants(ctx, tests[0].q, at)
	require.NoError(t, err)
	stored := got[0]
	require.True(t, stored.CreatedAt.Equal(session.CreatedAt))
	stored.CreatedAt = session.CreatedAt
	require.Equal(t, session, stored, "stored as made")

	listed, err := s.ListGrants(ctx, "demo", store.GrantFilter{SessionID: "s-2", Now: at})
	require.NoError(t, err)
	require.Equal(t, []string{otherSession.ID}, ids(listed))

	by := agent.Caller{Name: "bo", Issuer: agent.IssuerStaticToken, Subject: "bo"}
	_, err = s.RevokeGrant(ctx, "rival", session.ID, by, at.Add(time.Minute))
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "another tenant's: %v", err)
	revoked, err := s.RevokeGrant(ctx, "demo", session.ID, by, at.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, revoked.RevokedAt.Equal(at.Add(time.Minute)))
	require.Equal(t, []string{"bo", agent.IssuerStaticToken, "bo"}, []string{revoked.RevokedBy, revoked.RevokedByIssuer, revoked.RevokedBySubject})
	again, err := s.RevokeGrant(ctx, "demo", session.ID, agent.Caller{Name: "cy"}, at.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, "bo", again.RevokedBy, "revoked once")
	require.True(t, again.RevokedAt.Equal(at.Add(time.Minute)))

	got, err = s.ActiveGrants(ctx, tests[1].q, at.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{expiring.ID}, ids(got), "a revoked grant decides nothing")
	listed, err = s.ListGrants(ctx, "demo", store.GrantFilter{SessionID: "s-1", Now: soon})
	require.NoError(t, err)
	require.Equal(t, []string{turn.ID}, ids(listed), "the turn's grant: the others revoked or expired")
	listed, err = s.ListGrants(ctx, "demo", store.GrantFilter{SessionID: "s-1", Now: soon, Inactive: true})
	require.NoError(t, err)
	require.Equal(t, []string{session.ID, turn.ID, expiring.ID}, ids(listed))

	bad := session
	bad.Tool = "deploy"
	require.True(t, agent.IsCode(s.RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-1", CallID: "c1", Tool: "restart",
		Outcome: agent.ApprovalApproved, RequestedAt: at, DecidedAt: at, ApprovalID: bad.ApprovalID, GrantID: bad.ID, Grant: &bad}), agent.CodeInvalid),
		"a grant of another tool than its call's")
}
