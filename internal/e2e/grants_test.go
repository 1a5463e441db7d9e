package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// startTwice starts the two-step turn of agent careful in a session.
func (e *httpEnv) startTwice(session string) string {
	e.t.Helper()
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, fmt.Sprintf(`{"agent_id": "careful", "session_id": %q, "prompt": %q}`, session, twicePrompt), &started)
	return started.GetStreamId()
}

// approveOverHTTP decides a waiting call as the approver, with what
// else the body says (a scope, a match), and returns the ack.
func (e *httpEnv) approveOverHTTP(streamID string, p *pb.PendingApproval, approved bool, more string) *pb.ApproveResponse {
	e.t.Helper()
	var ack pb.ApproveResponse
	e.ok("POST", "/v1/"+streamID+"/approvals/"+url.PathEscape(p.GetCallId()), e.approver,
		fmt.Sprintf(`{"approval_id": %q, "approved": %t%s}`, p.GetApprovalId(), approved, more), &ack)
	return &ack
}

// decisionsOf is a turn's records, each as "<expression> <outcome> via
// <via> <grant>", in the order decided.
func (e *httpEnv) decisionsOf(streamID string) []string {
	e.t.Helper()
	recs, err := e.Store().Approvals(context.Background(), "demo", strings.TrimPrefix(streamID, "turn/demo/"))
	require.NoError(e.t, err)
	var out []string
	for _, r := range recs {
		expr := strings.TrimSuffix(strings.TrimPrefix(string(r.Args), `{"expression": "`), `"}`)
		out = append(out, fmt.Sprintf("%s %s via %s %s", expr, r.Outcome, r.Via, r.GrantID))
		require.Equal(e.t, "ann", r.Approver)
		require.Equal(e.t, []string{agent.IssuerStaticToken, "ann"}, []string{r.ApproverIssuer, r.ApproverSubject})
	}
	return out
}

// TestApprovalsRemembered: an approval remembered for the turn decides
// the turn's next call of the tool, which does not wait, and no call of
// another turn; one remembered for the session, with a match, decides
// the session's later calls whose arguments match, and not others, nor
// another session's; once revoked it decides nothing. Each call a grant
// decides is recorded and logged as approved via the grant, by its
// approver; the grants are listed with who made them and who revoked
// them. A user's token may not approve, nor list or revoke grants.
func TestApprovalsRemembered(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script = twiceScript })
	session := "s-" + testserver.RandomID()

	// For the turn: its next step's call is decided by the grant.
	t1 := e.startTwice(session)
	p := e.waitPending(t1)
	ack := e.approveOverHTTP(t1, p, true, `, "scope": "turn"`)
	turnGrant := ack.GetGrantId()
	require.Equal(t, agent.GrantIDOf(p.GetApprovalId()), turnGrant)
	require.Equal(t, "The result is 20.", e.turnResult(t1).Output)
	require.Equal(t, []string{"2 * 3 approved via update " + turnGrant, "4 * 5 approved via grant " + turnGrant}, e.decisionsOf(t1))
	var decided []string
	waited := 0
	for _, ev := range e.events(t1, e.user) {
		if d := ev.GetApprovalDecided(); d != nil {
			decided = append(decided, d.GetOutcome()+" by "+d.GetApprover()+" via "+d.GetVia()+" "+d.GetGrantId())
		}
		if ev.GetApprovalRequired() != nil {
			waited++
		}
	}
	require.Equal(t, []string{"approved by ann via update " + turnGrant, "approved by ann via grant " + turnGrant}, decided)
	require.Equal(t, 1, waited, "the second call did not wait")
	(&env{Server: e.Server, t: t}).replay(t1, "turn_approval_grant")

	// Not another turn's; for the session, where the argument matches.
	t2 := e.startTwice(session)
	p = e.waitPending(t2)
	ack = e.approveOverHTTP(t2, p, true, `, "scope": "session", "match": [{"path": "/expression", "equals": "2 * 3"}], "expires_in_sec": 3600`)
	sessionGrant := ack.GetGrantId()
	p2 := e.waitPendingNot(t2, p.GetApprovalId())
	require.JSONEq(t, `{"expression": "4 * 5"}`, p2.GetArgsJson(), "4 * 5 does not match: it waits")
	e.approveOverHTTP(t2, p2, true, "")
	require.Equal(t, "The result is 20.", e.turnResult(t2).Output)

	// The session's next turn: 2 * 3 decided by the grant, 4 * 5 waits.
	t3 := e.startTwice(session)
	p3 := e.waitPending(t3)
	require.JSONEq(t, `{"expression": "4 * 5"}`, p3.GetArgsJson())
	e.approveOverHTTP(t3, p3, false, `, "reason": "not now"`)
	require.Equal(t, agent.StatusCompleted, e.turnResult(t3).Status)
	require.Equal(t, []string{"2 * 3 approved via grant " + sessionGrant, "4 * 5 rejected via update "}, e.decisionsOf(t3))

	// Another session's turn waits.
	other := e.startTwice("s-" + testserver.RandomID())
	require.JSONEq(t, `{"expression": "2 * 3"}`, e.waitPending(other).GetArgsJson())

	// The grants, as listed; a user may not see or revoke them.
	var list pb.ListGrantsResponse
	e.ok("GET", "/v1/grants?session_id="+session, e.approver, "", &list)
	var listed []string
	for _, g := range list.GetGrants() {
		listed = append(listed, fmt.Sprintf("%s %s %s %s by %s (%s %s)", g.GetId(), g.GetScope(), g.GetTool(), g.GetAgentId(),
			g.GetApprover(), g.GetApproverIssuer(), g.GetApproverSubject()))
	}
	require.Equal(t, []string{
		turnGrant + " turn careful_calculator careful by ann (" + agent.IssuerStaticToken + " ann)",
		sessionGrant + " session careful_calculator careful by ann (" + agent.IssuerStaticToken + " ann)",
	}, listed)
	require.Len(t, list.GetGrants()[1].GetMatch(), 1)
	require.Equal(t, "/expression", list.GetGrants()[1].GetMatch()[0].GetPath())
	require.Equal(t, "2 * 3", list.GetGrants()[1].GetMatch()[0].GetEquals().GetStringValue())
	require.NotNil(t, list.GetGrants()[1].GetExpiresAt())
	e.problem("GET", "/v1/grants?session_id="+session, e.user, "", http.StatusForbidden)
	e.problem("POST", "/v1/grants/"+sessionGrant+"/revoke", e.user, `{}`, http.StatusForbidden)
	e.problem("POST", "/v1/grants/"+sessionGrant+"/revoke", e.rival, `{}`, http.StatusNotFound)

	// Revoked, the grant decides nothing more.
	var revoked pb.Grant
	e.ok("POST", "/v1/grants/"+sessionGrant+"/revoke", e.approver, `{}`, &revoked)
	require.Equal(t, "ann", revoked.GetRevokedBy())
	require.NotNil(t, revoked.GetRevokedAt())
	t4 := e.startTwice(session)
	require.JSONEq(t, `{"expression": "2 * 3"}`, e.waitPending(t4).GetArgsJson(), "the call waits again")
	e.ok("GET", "/v1/grants?session_id="+session, e.approver, "", &list)
	require.Len(t, list.GetGrants(), 1, "the turn's grant is in force; the revoked one is listed only with include_inactive")
	e.ok("GET", "/v1/grants?session_id="+session+"&include_inactive=true", e.approver, "", &list)
	require.Len(t, list.GetGrants(), 2)

	// A user cannot approve, with a scope or without.
	e.problem("POST", "/v1/"+t4+"/approvals/call_0", e.user,
		fmt.Sprintf(`{"approval_id": %q, "approved": true, "scope": "session"}`, e.waitPending(t4).GetApprovalId()), http.StatusForbidden)
	require.Eventually(t, func() bool { return len(e.waitPending(t4).GetApprovalId()) > 0 }, time.Minute, 50*time.Millisecond, "still waiting")
}
