package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// lostRestart is a restart whose first delivery's outcome is unknown;
// sent again, it is restarted, and not sent again, it stays unknown with
// the decision.
func lostRestart(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
	switch {
	case in.Resend == nil:
		return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolUnknown, Preview: "unknown outcome: …",
			Unknown: "an earlier attempt of this call was sending POST https://ops.example.com/restart when it was interrupted"}, nil
	case in.Resend.Approved:
		return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK, Preview: "restarted"}, nil
	}
	return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolUnknown, Preview: "unknown outcome: " + in.Resend.Message}, nil
}

// TestUnknownOutcomeAsksAgain: a call whose tool asks a person and whose
// outcome is unknown asks again, whether to send it again, before the
// model is told; an approval sends it again under the decision's
// approval id, and a rejection, a timeout and a cancellation send
// nothing, the model reading the decision. A call whose tool asks no
// one is the model's at once.
func TestUnknownOutcomeAsksAgain(t *testing.T) {
	resendID := agent.ResendApprovalIDOf("default-test-run-id", 2, "c1")
	tests := []struct {
		name    string
		asks    bool
		decide  func(env *testsuite.TestWorkflowEnvironment, t *testing.T)
		cancel  bool
		resend  *contract.Resend // what the second ExecuteTool was given
		status  string
		outcome string // the decision's record
	}{
		{
			name: "approved: sent again", asks: true,
			decide: func(env *testsuite.TestWorkflowEnvironment, t *testing.T) {
				update(env, agent.ApprovalDecision{CallID: "c1", ApprovalID: resendID, Approved: true, Approver: "ana"})
			},
			resend: &contract.Resend{ApprovalID: resendID, Approved: true,
				Message: "ana approved sending it again after its first outcome was unknown; this is the outcome of that second delivery"},
			status: agent.ToolOK, outcome: agent.ApprovalApproved,
		},
		{
			name: "rejected with a reason: not sent again", asks: true,
			decide: func(env *testsuite.TestWorkflowEnvironment, t *testing.T) {
				env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c1", ApprovalID: resendID, Reason: "it went through", Approver: "bob"})
			},
			resend: &contract.Resend{ApprovalID: resendID, Message: "bob was asked whether to send it again and decided not to: it went through"},
			status: agent.ToolUnknown, outcome: agent.ApprovalRejected,
		},
		{
			name: "timed out: not sent again", asks: true,
			resend: &contract.Resend{ApprovalID: resendID,
				Message: "no one decided within the approval timeout of 10m0s whether to send it again; it was not sent again"},
			status: agent.ToolUnknown, outcome: agent.ApprovalTimedOut,
		},
		{
			name: "cancelled: the unknown outcome stands", asks: true, cancel: true,
			status: agent.ToolUnknown, outcome: agent.ApprovalCanceled,
		},
		{name: "no approval asked: the model's at once", status: agent.ToolUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var approvals []string
			if tt.asks {
				approvals = []string{"c1"}
			}
			f, env := approvalEnv(t, []agent.ToolCall{restart("c1", "api")}, approvals...)
			f.tools["restart"] = lostRestart
			var waiting []agent.PendingApproval
			var unbound, remembers *updateResult
			if tt.asks {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana"})
				}, time.Minute)
				env.RegisterDelayedCallback(func() {
					waiting = pending(t, env)
					// A decision that does not name the re-send's approval
					// id (one made for the first approval) is refused, and
					// so is one that would remember it.
					unbound = update(env, agent.ApprovalDecision{CallID: "c1", Approved: true, Approver: "ana"})
					remembers = update(env, agent.ApprovalDecision{CallID: "c1", ApprovalID: resendID, Approved: true, Approver: "ana", Scope: agent.ScopeTurn})
					switch {
					case tt.cancel:
						env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough"})
					case tt.decide != nil:
						tt.decide(env, t)
					}
				}, 2*time.Minute)
			}
			var res agent.TurnResult
			if tt.cancel {
				res = runCanceled(t, env, req())
			} else {
				var failure *temporal.ApplicationError
				res, failure = runTurn(t, env, req())
				require.Nil(t, failure)
			}
			require.Equal(t, tt.status, res.Metadata.ToolCalls[0].Status)

			if !tt.asks {
				require.Len(t, f.toolCalls, 1)
				require.Empty(t, f.approvals)
				return
			}
			require.False(t, unbound.accepted)
			require.ErrorContains(t, unbound.err, "the decision is whether to send it again, and names its approval_id")
			require.False(t, remembers.accepted)
			require.ErrorContains(t, remembers.err, "sending a call again is decided for that call alone")
			require.Len(t, waiting, 1)
			require.True(t, waiting[0].Resend)
			require.Equal(t, resendID, waiting[0].ApprovalID)
			require.Len(t, f.approvals, 2)
			rec := f.approvals[1]
			require.True(t, rec.Resend)
			require.Equal(t, tt.outcome, rec.Outcome)
			require.Equal(t, resendID, rec.ApprovalID)
			if tt.resend == nil {
				require.Len(t, f.toolCalls, 1, "nothing runs after the turn was cancelled")
			} else {
				require.Len(t, f.toolCalls, 2)
				require.Equal(t, tt.resend, f.toolCalls[1].Resend)
				require.Equal(t, 2, f.toolCalls[1].Seq, "the decision's result replaces the call's step")
			}

			var asked *agent.ToolEvent
			for _, e := range events(t, env) {
				if e.Kind == agent.EventApprovalRequired && e.Tool.Resend {
					asked = e.Tool
				}
			}
			require.NotNil(t, asked)
			require.Equal(t, resendID, asked.ApprovalID)
			require.JSONEq(t, `{"service":"api"}`, string(asked.Args))
			require.Contains(t, asked.Reason, "send it again? Its outcome is unknown: an earlier attempt of this call was sending POST https://ops.example.com/restart")
		})
	}
}
