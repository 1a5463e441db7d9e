package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// careCatalog is a tenant whose calculator needs a person's approval.
const careCatalog = `
tenant: care
default_agent: careful
tools:
  - name: calculator
    kind: calculator
    approval: always
agents:
  - id: careful
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 600, approval_timeout_sec: 300}
`

// awaitPending waits until the turn has a call waiting for approval.
func (e *env) awaitPending(workflowID string) agent.PendingApproval {
	e.t.Helper()
	var p []agent.PendingApproval
	require.Eventually(e.t, func() bool {
		v, err := e.Client().QueryWorkflow(context.Background(), workflowID, "", contract.QueryPendingApprovals)
		if err != nil {
			return false
		}
		return v.Get(&p) == nil && len(p) > 0
	}, 30*time.Second, 50*time.Millisecond)
	return p[0]
}

func TestApprovalWithTemporalCLI(t *testing.T) {
	e := newEnv(t)
	e.ApplyCatalog(t, careCatalog)

	tests := []struct {
		name     string
		decide   func(id string, callID string) (string, error)
		status   string
		output   string
		outcome  string
		approver string
	}{
		{
			name: "update approves",
			decide: func(id, callID string) (string, error) {
				return e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
					"--input", fmt.Sprintf(`{"call_id":%q,"approved":true,"approver":"ana"}`, callID))
			},
			status: agent.ToolOK, output: "The result is 42.", outcome: agent.ApprovalApproved, approver: "ana",
		},
		{
			name: "signal rejects",
			decide: func(id, callID string) (string, error) {
				return e.Temporal("workflow", "signal", "--workflow-id", id, "--name", "approve",
					"--input", fmt.Sprintf(`{"call_id":%q,"approved":false,"reason":"not now","approver":"bob"}`, callID))
			},
			status: agent.ApprovalRejected, output: "The result is error: the call was rejected by bob and not run: not now.",
			outcome: agent.ApprovalRejected, approver: "bob",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := fmt.Sprintf("approve-%d-%s", i, testserver.RandomID())
			id := contract.TurnWorkflowID("care", job)
			e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"care","job_id":%q,"prompt":"What is 6 * 7?"}`, job))
			p := e.awaitPending(id)
			require.Equal(t, "calculator", p.Tool)
			require.JSONEq(t, `{"expression":"6 * 7"}`, string(p.Args))

			// A decision on a call that does not wait is refused and changes nothing.
			out, err := e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
				"--input", `{"call_id":"no-such-call","approved":true,"approver":"ana"}`)
			require.Error(t, err)
			require.Contains(t, out, `no tool call \"no-such-call\" is waiting for approval`)
			// One bound to another call (its approval id) is refused too.
			require.Regexp(t, `^apr_[0-9a-f]{24}$`, p.ApprovalID)
			out, err = e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
				"--input", fmt.Sprintf(`{"call_id":%q,"approval_id":"apr_000000000000000000000000","approved":true,"approver":"ana"}`, p.CallID))
			require.Error(t, err)
			require.Contains(t, out, "the decision was made for another call, step or run")

			out, err = tt.decide(id, p.CallID)
			require.NoError(t, err, out)
			res, err := e.result(id)
			require.NoError(t, err)
			require.Equal(t, tt.output, res.Output)
			require.Equal(t, tt.status, res.Metadata.ToolCalls[0].Status)

			recs, err := e.Store().Approvals(context.Background(), "care", job)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, tt.outcome, recs[0].Outcome)
			require.Equal(t, tt.approver, recs[0].Approver)
			if i == 0 {
				e.replay(id, "turn_approval")
			}
		})
	}
}

// hurryCatalog is careCatalog for tenant hurry, with an approval timeout of one second.
var hurryCatalog = strings.NewReplacer("tenant: care", "tenant: hurry", "approval_timeout_sec: 300", "approval_timeout_sec: 1").
	Replace(careCatalog)

func TestApprovalTimeoutAndTwoCallsWithTemporalCLI(t *testing.T) {
	e := newEnv(t)
	e.ApplyCatalog(t, careCatalog)
	e.ApplyCatalog(t, hurryCatalog)

	t.Run("timed out call reaches the model", func(t *testing.T) {
		job := "hurry-" + testserver.RandomID()
		id := contract.TurnWorkflowID("hurry", job)
		e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"hurry","job_id":%q,"prompt":"What is 6 * 7?"}`, job))
		res, err := e.result(id)
		require.NoError(t, err)
		require.Equal(t, "The result is error: no decision on the call within the approval timeout of 1s; it was not run.", res.Output)
		require.Equal(t, agent.ApprovalTimedOut, res.Metadata.ToolCalls[0].Status)
	})

	t.Run("two calls decided separately", func(t *testing.T) {
		job := "two-" + testserver.RandomID()
		id := contract.TurnWorkflowID("care", job)
		e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"care","job_id":%q,"prompt":"compare 2 * 3 and 4 * 5"}`, job))
		var pending []agent.PendingApproval
		require.Eventually(t, func() bool {
			v, err := e.Client().QueryWorkflow(context.Background(), id, "", contract.QueryPendingApprovals)
			return err == nil && v.Get(&pending) == nil && len(pending) == 2
		}, 30*time.Second, 50*time.Millisecond)
		out, err := e.Temporal("workflow", "signal", "--workflow-id", id, "--name", "approve",
			"--input", fmt.Sprintf(`{"call_id":%q,"approved":false,"reason":"too big","approver":"bob"}`, pending[1].CallID))
		require.NoError(t, err, out)
		require.Eventually(t, func() bool {
			v, err := e.Client().QueryWorkflow(context.Background(), id, "", contract.QueryPendingApprovals)
			return err == nil && v.Get(&pending) == nil && len(pending) == 1
		}, 30*time.Second, 50*time.Millisecond)
		out, err = e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
			"--input", fmt.Sprintf(`{"call_id":%q,"approved":true,"approver":"ana"}`, pending[0].CallID))
		require.NoError(t, err, out)
		res, err := e.result(id)
		require.NoError(t, err)
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
		require.Equal(t, agent.ApprovalRejected, res.Metadata.ToolCalls[1].Status)
		recs, err := e.Store().Approvals(context.Background(), "care", job)
		require.NoError(t, err)
		require.Len(t, recs, 2)
		require.Equal(t, "bob", recs[0].Approver, "stored in the order decided")
	})
}

// TestOperatorRemembersWithTemporalCLI: the operator's approve update, as
// docs/guides/approvals.md shows it, may remember the approval for the turn:
// the turn's next call of the tool is decided by the grant, recorded under the
// approver the operator named, with no issuer (Temporal's clients are trusted
// as the operator is).
func TestOperatorRemembersWithTemporalCLI(t *testing.T) {
	e := newEnvWith(t, strings.Replace(testScript, "rules:\n", `rules:
  - name: twice-again
    when: {user: '^twice: (?P<a>[-0-9.+*/ ]+) then (?P<b>[-0-9.+*/ ]+)$', tool: '^6$'}
    reply: {tool_calls: [{name: calculator, id: call_0, arguments: '{"expression": "${b}"}'}]}
  - name: twice
    when: {user: '^twice: (?P<a>[-0-9.+*/ ]+) then (?P<b>[-0-9.+*/ ]+)$'}
    reply: {tool_calls: [{name: calculator, id: call_0, arguments: '{"expression": "${a}"}'}]}
`, 1))
	e.ApplyCatalog(t, careCatalog)
	job := "remember-" + testserver.RandomID()
	id := contract.TurnWorkflowID("care", job)
	e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"care","job_id":%q,"prompt":"twice: 2 * 3 then 4 * 5"}`, job))
	p := e.awaitPending(id)
	out, err := e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
		"--input", fmt.Sprintf(`{"call_id":%q,"approved":true,"approver":"ana","scope":"turn","match":[{"path":"/expression","equals":"4 * 5"}]}`, p.CallID))
	require.Error(t, err, "the match must hold for the call it approves")
	require.Contains(t, out, "match does not hold")
	out, err = e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
		"--input", fmt.Sprintf(`{"call_id":%q,"approved":true,"approver":"ana","scope":"turn"}`, p.CallID))
	require.NoError(t, err, out)
	require.Contains(t, out, agent.GrantIDOf(p.ApprovalID))
	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, "The result is 20.", res.Output)
	recs, err := e.Store().Approvals(context.Background(), "care", job)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s %s by %s via %s %s issuer=%q", r.CallID, r.Outcome, r.Approver, r.Via, r.GrantID, r.ApproverIssuer))
	}
	grant := agent.GrantIDOf(p.ApprovalID)
	require.Equal(t, []string{"call_0 approved by ana via update " + grant + ` issuer=""`, "call_0 approved by ana via grant " + grant + ` issuer=""`}, got)
}
