package workflows

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func opsAgent() agent.Agent {
	a := testAgent()
	a.ID = "ops"
	a.Tools = append(a.Tools, agent.Tool{Name: "restart", Kind: "http", Approval: agent.ApprovalAlways})
	a.Limits.ApprovalTimeoutSec = 600
	a.Limits.TurnTimeoutSec = 3600
	return a
}

func restart(id, service string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: "restart", Arguments: `{"service":"` + service + `"}`}
}

func needs(ids ...string) []contract.ApprovalNeed {
	var out []contract.ApprovalNeed
	for _, id := range ids {
		out = append(out, contract.ApprovalNeed{CallID: id, Reason: "the tool always needs approval"})
	}
	return out
}

// approvalEnv runs an ops turn whose first reply asks for the given calls.
func approvalEnv(t *testing.T, calls []agent.ToolCall, approvalIDs ...string) (*fakeTurn, *testsuite.TestWorkflowEnvironment) {
	first := toolReply(calls...)
	first.Approvals = needs(approvalIDs...)
	f := &fakeTurn{agent: opsAgent(), replies: []contract.CallModelResult{first, textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
			"restart": okTool("restarted"), "calculator": okTool("4"),
		}}
	return f, newEnv(t, f)
}

func pending(t *testing.T, env *testsuite.TestWorkflowEnvironment) []agent.PendingApproval {
	t.Helper()
	v, err := env.QueryWorkflow(contract.QueryPendingApprovals)
	require.NoError(t, err)
	var p []agent.PendingApproval
	require.NoError(t, v.Get(&p))
	return p
}

type updateResult struct {
	accepted bool
	err      error
	ack      contract.ApprovalAck
}

func update(env *testsuite.TestWorkflowEnvironment, d any) *updateResult {
	r := &updateResult{}
	env.UpdateWorkflow(contract.UpdateApprove, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { r.accepted = true },
		OnReject: func(err error) { r.err = err },
		OnComplete: func(v any, err error) {
			if err != nil {
				r.err = err
				return
			}
			r.ack, _ = v.(contract.ApprovalAck)
		},
	}, d)
	return r
}

func req() agent.TurnRequest {
	r := request()
	r.AgentID = "ops"
	return r
}

func TestApprovalBySignal(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 1)
		require.Equal(t, "c1", p[0].CallID)
		require.Equal(t, 10*time.Minute, p[0].Deadline.Sub(p[0].RequestedAt))
		require.Empty(t, f.toolCalls, "nothing runs before the decision")
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana"})
	}, time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Len(t, f.toolCalls, 1)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Len(t, f.approvals, 1)
	a := f.approvals[0]
	require.Equal(t, agent.ApprovalApproved, a.Outcome)
	require.Equal(t, "ana", a.Approver)
	require.Equal(t, "signal", a.Via)
	require.Equal(t, time.Minute, a.DecidedAt.Sub(a.RequestedAt))
	require.Empty(t, pending(t, env))
}

func TestApprovalRejectedByUpdateReachesTheModel(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	var bad, good, twice *updateResult
	env.RegisterDelayedCallback(func() {
		bad = update(env, agent.ApprovalDecision{CallID: "nope", Approved: true, Approver: "ana"})
		good = update(env, agent.ApprovalDecision{CallID: "c1", Approved: false, Reason: "not during the sale", Approver: "ana"})
		twice = update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "bo"})
	}, time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)

	require.False(t, bad.accepted)
	require.ErrorContains(t, bad.err, `no tool call "nope" is waiting for approval`)
	require.True(t, good.accepted)
	require.NoError(t, good.err)
	require.Equal(t, contract.ApprovalAck{CallID: "c1", Outcome: agent.ApprovalRejected, ApprovalID: agent.ApprovalIDOf("default-test-run-id", 2, "c1")}, good.ack)
	require.False(t, twice.accepted)
	require.ErrorContains(t, twice.err, `tool call "c1" was already decided`)

	require.Empty(t, f.toolCalls, "a rejected call does not run")
	require.Equal(t, agent.ApprovalRejected, res.Metadata.ToolCalls[0].Status)
	require.Equal(t, []contract.ToolFailure{{Seq: 2, CallID: "c1", Tool: "restart",
		Message: "the call was rejected by ana and not run: not during the sale"}}, f.modelCalls[1].ToolFailures)
	require.Len(t, f.approvals, 1)
	require.Equal(t, "update", f.approvals[0].Via)
	require.Equal(t, []agent.ApprovalEvent{{Outcome: agent.ApprovalRejected, Approver: "ana", Reason: "not during the sale", Via: agent.ViaUpdate}},
		decisions(t, env))
}

func TestApprovalTimesOut(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Empty(t, f.toolCalls)
	require.Equal(t, agent.ApprovalTimedOut, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, f.modelCalls[1].ToolFailures[0].Message, "approval timeout of 10m0s")
	require.Len(t, f.approvals, 1)
	require.Equal(t, agent.ApprovalTimedOut, f.approvals[0].Outcome)
	require.Equal(t, 10*time.Minute, f.approvals[0].DecidedAt.Sub(f.approvals[0].RequestedAt))
	require.Equal(t, []agent.ApprovalEvent{{Outcome: agent.ApprovalTimedOut, Via: agent.ViaTimeout}}, decisions(t, env))
}

// decisions are the approval_decided events of the turn's log, in order.
func decisions(t *testing.T, env *testsuite.TestWorkflowEnvironment) []agent.ApprovalEvent {
	t.Helper()
	var out []agent.ApprovalEvent
	for _, e := range events(t, env) {
		if e.Kind == agent.EventApprovalDecided {
			require.NoError(t, e.Validate())
			out = append(out, *e.Approval)
		}
	}
	return out
}

func TestTwoApprovalsDecidedSeparately(t *testing.T) {
	calls := []agent.ToolCall{restart("c1", "api"), calc("c2", "2+2"), restart("c3", "db")}
	f, env := approvalEnv(t, calls, "c1", "c3")
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 2)
		require.Len(t, f.toolCalls, 1, "the call without a policy runs at once")
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c3", Approved: false, Approver: "bob"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		p := pending(t, env)
		require.Len(t, p, 1)
		require.Equal(t, "c1", p[0].CallID)
		update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana"})
	}, 2*time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	var statuses []string
	for _, c := range res.Metadata.ToolCalls {
		statuses = append(statuses, c.CallID+":"+c.Status)
	}
	require.Equal(t, []string{"c1:ok", "c2:ok", "c3:rejected"}, statuses)
	require.Len(t, f.toolCalls, 2)
	require.Len(t, f.approvals, 2)
	require.Equal(t, "c3", f.approvals[0].CallID, "records in the order decisions came")

	v, err := env.QueryWorkflow(contract.QueryEvents, agent.EventsQuery{})
	require.NoError(t, err)
	var page agent.EventsPage
	require.NoError(t, v.Get(&page))
	var kinds []string
	for _, e := range page.Events {
		k := string(e.Kind)
		if e.Kind == agent.EventStatus {
			k = e.Status
		}
		if e.Tool != nil {
			k += ":" + e.Tool.CallID
		}
		if a := e.Approval; a != nil {
			k += fmt.Sprintf(" %s by %s via %s", a.Outcome, a.Approver, a.Via)
		}
		kinds = append(kinds, k)
	}
	// Each decision is logged as it is acted on; the turn runs again
	// before the last call decided starts.
	require.Equal(t, []string{"RUNNING", "step_start", "usage", "tool_start:c2", "approval_required:c1", "approval_required:c3",
		"WAITING_APPROVAL", "approval_decided:c3 rejected by bob via signal", "tool_end:c3",
		"approval_decided:c1 approved by ana via update", "RUNNING", "tool_start:c1", "tool_end:c1", "tool_end:c2", "step_finish",
		"step_start", "usage", "step_finish", "content", "COMPLETED"}, kinds)
	for _, e := range page.Events {
		require.NoError(t, e.Validate(), "%s", e)
	}
}

// TestIncompleteDecisionsAreRefused: a decision must say whether it
// approves and who decided. The update refuses one that does not; a
// signal that does not is ignored, and the call still waits.
func TestIncompleteDecisionsAreRefused(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	var noApproved, noApprover *updateResult
	env.RegisterDelayedCallback(func() {
		noApproved = update(env, map[string]any{"call_id": "c1", "approver": "ana"})
		noApprover = update(env, map[string]any{"call_id": "c1", "approved": true})
		env.SignalWorkflow(contract.SignalApprove, map[string]any{"call_id": "c1", "approver": "ana"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Len(t, pending(t, env), 1, "the incomplete signal decided nothing")
		env.SignalWorkflow(contract.SignalApprove, map[string]any{"call_id": "c1", "approved": false, "approver": "ana"})
	}, 2*time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)

	require.False(t, noApproved.accepted)
	require.ErrorContains(t, noApproved.err, "approved is required")
	var app *temporal.ApplicationError
	require.True(t, errors.As(noApproved.err, &app))
	require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
	require.True(t, app.NonRetryable(), "sending the same decision again cannot help")
	require.False(t, noApprover.accepted)
	require.ErrorContains(t, noApprover.err, "approver is required")
	require.Len(t, f.approvals, 1)
	require.Equal(t, agent.ApprovalRejected, f.approvals[0].Outcome)
	require.Equal(t, 2*time.Minute, f.approvals[0].DecidedAt.Sub(f.approvals[0].RequestedAt))
	require.Equal(t, agent.ApprovalRejected, res.Metadata.ToolCalls[0].Status)
}

// TestReplayAsksNoOne: a replay of a recorded turn (an evaluation's) does
// not wait for a person on a call whose tool asks one: no tool runs live
// in a replay, and the call gets its recorded result.
func TestReplayAsksNoOne(t *testing.T) {
	f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, "c1")
	r := req()
	r.Channel, r.Replay = agent.ChannelEval, &agent.Replay{JobID: "recorded-1"}
	res, failure := runTurn(t, env, r)
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)
	require.Len(t, f.toolCalls, 1, "the call is answered (from the recording) without a decision")
	require.Empty(t, f.approvals)
}
