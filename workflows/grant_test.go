package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// requireRefused checks that an update was refused, before it was
// accepted, with the error type of code and a message holding msg.
func requireRefused(t *testing.T, r *updateResult, code agent.Code, msg string) {
	t.Helper()
	require.False(t, r.accepted, "refused before it was accepted")
	require.ErrorContains(t, r.err, msg)
	var app *temporal.ApplicationError
	require.True(t, errors.As(r.err, &app), "%v", r.err)
	require.Equal(t, code.Class().Type, app.Type())
}

// TestDecisionsAreBoundToTheirCall: two steps each ask for a call with
// the same model-made id, c1. Each waiting call has an approval id of its
// own; a decision that names another call's — another run's, an earlier
// step's — decides nothing and the call still waits; a decision with the
// call's own approval id decides it, and so does the operator's, with
// the call id alone, in the later step too.
func TestDecisionsAreBoundToTheirCall(t *testing.T) {
	first, second := toolReply(restart("c1", "api")), toolReply(restart("c1", "db"))
	first.Approvals, second.Approvals = needs("c1"), needs("c1")
	f := &fakeTurn{agent: opsAgent(), replies: []contract.CallModelResult{first, second, textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"restart": okTool("restarted")}}
	env := newEnv(t, f)
	var one, two agent.PendingApproval
	var refused []*updateResult
	var good *updateResult
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 1)
		one = p[0]
		// Another run's decision on a call c1 at the same step.
		refused = append(refused, update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "mallory",
			ApprovalID: agent.ApprovalIDOf("another-run", 2, "c1")}))
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "mallory",
			ApprovalID: agent.ApprovalIDOf("another-run", 2, "c1")})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 1, "the call still waits")
		good = update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana", ApprovalID: one.ApprovalID})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 1)
		two = p[0]
		require.Equal(t, "c1", two.CallID)
		require.NotEqual(t, one.ApprovalID, two.ApprovalID, "the later step's call is another call")
		// The first step's decision, sent again.
		refused = append(refused, update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana", ApprovalID: one.ApprovalID}))
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana", ApprovalID: one.ApprovalID})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 1, "the call still waits")
		// The operator's decision names the call that waits now.
		env.SignalWorkflow(contract.SignalApprove, map[string]any{"call_id": "c1", "approved": false, "approver": "bob"})
	}, 4*time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)

	requireRefused(t, refused[0], agent.CodeNotFound, "the decision was made for another call, step or run")
	requireRefused(t, refused[1], agent.CodeConflict, "was already decided")
	// The test environment's run id: the first call is step 2's.
	require.Equal(t, agent.ApprovalIDOf("default-test-run-id", 2, "c1"), one.ApprovalID, "the run, the step, the call")
	require.True(t, good.accepted)
	require.Equal(t, contract.ApprovalAck{CallID: "c1", Outcome: agent.ApprovalApproved, ApprovalID: one.ApprovalID}, good.ack)

	var statuses []string
	for _, c := range res.Metadata.ToolCalls {
		statuses = append(statuses, c.CallID+":"+c.Status)
	}
	require.Equal(t, []string{"c1:ok", "c1:rejected"}, statuses)
	require.Len(t, f.toolCalls, 1)
	var recs []string
	for _, a := range f.approvals {
		recs = append(recs, a.ApprovalID+" "+a.Outcome+" by "+a.Approver+" via "+a.Via)
	}
	require.Equal(t, []string{one.ApprovalID + " approved by ana via update", two.ApprovalID + " rejected by bob via signal"}, recs)

	var required []string
	for _, e := range events(t, env) {
		if e.Kind == agent.EventApprovalRequired {
			required = append(required, e.Tool.ApprovalID)
		}
	}
	require.Equal(t, []string{one.ApprovalID, two.ApprovalID}, required, "approval_required carries the approval id")
}

// TestApprovalRememberedForTheSession: an approval whose scope is the
// session makes a grant of the turn's session, agent and tool with the
// approval's match, recorded with the approval and named in its ack and
// approval_decided event. The round's other waiting call that the grant
// covers is decided by it at once; one whose arguments do not match
// still waits. A later step's call whose need names a grant (CallModel
// found it) does not wait: it is recorded and logged as approved via
// that grant, by its approver.
func TestApprovalRememberedForTheSession(t *testing.T) {
	first := toolReply(restart("c1", "api"), restart("c2", "api"), restart("c3", "db"))
	first.Approvals = needs("c1", "c2", "c3")
	later := &agent.Grant{ID: "grant_later", TenantID: "t1", Scope: agent.ScopeSession, SessionID: "s-1", JobID: "job-0",
		AgentID: "ops", Tool: "restart", Approver: "ana", ApproverIssuer: "https://idp.example", ApproverSubject: "00u1"}
	second := toolReply(restart("c1", "api"))
	second.Approvals = []contract.ApprovalNeed{{CallID: "c1", Reason: "the tool always needs approval", Grant: later}}
	f := &fakeTurn{agent: opsAgent(), replies: []contract.CallModelResult{first, second, textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"restart": okTool("restarted")}}
	env := newEnv(t, f)
	match := agent.ArgsMatch{{Path: "/service", Equals: json.RawMessage(`"api"`)}}
	var ack *updateResult
	var c1 agent.PendingApproval
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 3)
		c1 = p[0]
		ack = update(env, agent.ApprovalDecision{CallID: "c1", ApprovalID: c1.ApprovalID, Approved: true, Approver: "ana",
			ApproverIssuer: "https://idp.example", ApproverSubject: "00u1", Reason: "api restarts are fine today",
			Scope: agent.ScopeSession, Match: match, ExpiresInSec: 3600})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 1, "the grant decided c2; c3's arguments do not match")
		require.Equal(t, "c3", p[0].CallID)
		update(env, agent.ApprovalDecision{CallID: "c3", ApprovalID: p[0].ApprovalID, Approved: false, Approver: "ana"})
	}, 2*time.Minute)
	r := req()
	r.SessionID = "s-1"
	res, failure := runTurn(t, env, r)
	require.Nil(t, failure)

	grantID := agent.GrantIDOf(c1.ApprovalID)
	require.True(t, ack.accepted)
	require.Equal(t, contract.ApprovalAck{CallID: "c1", Outcome: agent.ApprovalApproved, ApprovalID: c1.ApprovalID, GrantID: grantID}, ack.ack)

	var statuses []string
	for _, c := range res.Metadata.ToolCalls {
		statuses = append(statuses, c.CallID+":"+c.Status)
	}
	require.Equal(t, []string{"c1:ok", "c2:ok", "c3:rejected", "c1:ok"}, statuses)

	require.Len(t, f.approvals, 4)
	made := f.approvals[0]
	require.Equal(t, agent.ViaUpdate, made.Via)
	require.Equal(t, grantID, made.GrantID)
	require.Equal(t, "https://idp.example", made.ApproverIssuer)
	require.Equal(t, "00u1", made.ApproverSubject)
	require.NotNil(t, made.Grant)
	g := *made.Grant
	require.Equal(t, agent.Grant{ID: grantID, TenantID: "t1", Scope: agent.ScopeSession, SessionID: "s-1", JobID: "job-1", AgentID: "ops",
		Tool: "restart", Match: match, CallID: "c1", ApprovalID: c1.ApprovalID, Approver: "ana", ApproverIssuer: "https://idp.example",
		ApproverSubject: "00u1", Reason: "api restarts are fine today", CreatedAt: made.DecidedAt, ExpiresAt: g.ExpiresAt}, g)
	require.Equal(t, time.Hour, g.ExpiresAt.Sub(g.CreatedAt))

	var rest []string
	for _, a := range f.approvals[1:] {
		require.Nil(t, a.Grant, "only the approval with a scope makes a grant")
		rest = append(rest, a.CallID+" "+a.Outcome+" by "+a.Approver+" via "+a.Via+" "+a.GrantID+" "+a.ApproverSubject)
	}
	require.Equal(t, []string{
		"c2 approved by ana via grant " + grantID + " 00u1",
		"c3 rejected by ana via update  ",
		"c1 approved by ana via grant grant_later 00u1",
	}, rest)
	require.NotEqual(t, f.approvals[0].ApprovalID, f.approvals[3].ApprovalID, "step 4's c1 is a call of its own")

	var decided []string
	waited := 0
	for _, e := range events(t, env) {
		switch e.Kind {
		case agent.EventApprovalDecided:
			decided = append(decided, e.Tool.CallID+" "+e.Approval.Via+" "+e.Approval.GrantID)
		case agent.EventApprovalRequired:
			waited++
		}
	}
	require.Equal(t, []string{"c1 update " + grantID, "c2 grant " + grantID, "c3 update ", "c1 grant grant_later"}, decided)
	require.Equal(t, 3, waited, "the later step's call did not wait")
}

// TestRememberingRefusals: an approval to remember that cannot be is
// refused, and its call still waits: for a session the turn does not
// have, with a match its own call does not satisfy, a rejection, a scope
// that is none, a match without a scope.
func TestRememberingRefusals(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	api := agent.ArgsMatch{{Path: "/service", Equals: json.RawMessage(`"api"`)}}
	db := agent.ArgsMatch{{Path: "/service", Equals: json.RawMessage(`"db"`)}}
	tests := []struct {
		name string
		d    agent.ApprovalDecision
		msg  string
	}{
		{"no session", agent.ApprovalDecision{Approved: true, Scope: agent.ScopeSession, Match: api}, "the turn has no session"},
		{"match not its call's", agent.ApprovalDecision{Approved: true, Scope: agent.ScopeTurn, Match: db}, "match does not hold for the arguments of the call it approves"},
		{"a rejection", agent.ApprovalDecision{Approved: false, Scope: agent.ScopeTurn}, "only an approval is remembered"},
		{"no such scope", agent.ApprovalDecision{Approved: true, Scope: "forever"}, `scope "forever": want call (the default), turn or session`},
		{"match without scope", agent.ApprovalDecision{Approved: true, Match: api}, "match and expires_in_sec belong to an approval remembered"},
		{"a bad pointer", agent.ApprovalDecision{Approved: true, Scope: agent.ScopeTurn,
			Match: agent.ArgsMatch{{Path: "service", Equals: json.RawMessage(`"api"`)}}}, "want a JSON Pointer"},
		{"too long", agent.ApprovalDecision{Approved: true, Scope: agent.ScopeTurn, ExpiresInSec: agent.MaxGrantExpiresSec + 1}, "expires_in_sec"},
	}
	results := make([]*updateResult, len(tests))
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)[0]
		for i, tt := range tests {
			d := tt.d
			d.CallID, d.ApprovalID, d.Approver = "c1", p.ApprovalID, "ana"
			results[i] = update(env, d)
		}
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 1, "the call still waits")
		update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana", Scope: agent.ScopeTurn, Match: api})
	}, 2*time.Minute)
	_, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { requireRefused(t, results[i], agent.CodeInvalid, tt.msg) })
	}
	require.Len(t, f.approvals, 1)
	require.NotNil(t, f.approvals[0].Grant, "for the turn: a grant without a session")
	require.Equal(t, agent.ScopeTurn, f.approvals[0].Grant.Scope)
}

// TestOneCallIDTwiceInAReply: a reply whose two calls have one id (a
// model's mistake) waits on two calls, each with its approval id; each
// decision decides the call its approval id names.
func TestOneCallIDTwiceInAReply(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api"), restart("c1", "db")}, "c1", "c1")
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 2)
		require.NotEqual(t, p[0].ApprovalID, p[1].ApprovalID)
		require.JSONEq(t, `{"service":"db"}`, string(p[1].Args))
		update(env, agent.ApprovalDecision{CallID: "c1", ApprovalID: p[1].ApprovalID, Approved: true, Approver: "ana"})
		update(env, agent.ApprovalDecision{CallID: "c1", ApprovalID: p[0].ApprovalID, Approved: false, Approver: "ana"})
	}, time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Len(t, f.toolCalls, 1)
	require.JSONEq(t, `{"service":"db"}`, f.toolCalls[0].Call.Arguments, "the call approved is the db one")
	var statuses []string
	for _, c := range res.Metadata.ToolCalls {
		statuses = append(statuses, string(c.Args)+":"+c.Status)
	}
	require.Equal(t, []string{`{"service":"api"}:rejected`, `{"service":"db"}:ok`}, statuses)
}
