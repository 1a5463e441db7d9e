package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// A call delivered at most once whose earlier attempt may have sent its
// write ends unknown (internal/effects): the model is told it may or may
// not have taken effect. When the call's tool asks a person, the turn
// asks them first, with what may have happened: they can often tell (the
// booking is in the back office, or it is not), and only they may send
// it again. An approval sends it a second time, a delivery of its own in
// the ledger, under the decision's approval id (effects.Key.Resend), at
// most once too; the model reads that delivery's result. A rejection
// sends nothing, and the model reads the unknown outcome with the
// decision and its reason. A timeout or a cancellation sends nothing
// either, as the same wait for a first approval runs nothing. The person
// is asked once a call: a second delivery whose outcome is unknown too
// is the model's to handle.

// asksAgain reports whether the turn asks a person before it tells the
// model that call callID's outcome is unknown: its tool's policy asked
// one (a grant that decided it included), and the turn goes on.
func (r *toolRound) asksAgain(ctx workflow.Context, callID string) bool {
	if r.t.canceled != nil || ctx.Err() != nil {
		return false
	}
	return slices.ContainsFunc(r.needs, func(n contract.ApprovalNeed) bool { return n.CallID == callID })
}

// askResend asks whether to send call i again, whose outcome is unknown
// (res), and returns what came of the decision: the second delivery's
// result, or res with the decision (ExecuteTool stores it for the
// model). A turn that ends while it waits keeps res.
func (r *toolRound) askResend(ctx workflow.Context, i int, res contract.ExecuteToolResult) (contract.ExecuteToolResult, error) {
	t, c := r.t, r.calls[i]
	need := []contract.ApprovalNeed{{CallID: c.ID, Reason: resendReason(res.Unknown)}}
	var decision *contract.Resend
	t.awaitApprovals(ctx, r.base, r.calls, []int{i}, need, r.limits, true, func(_ int, outcome, message string) {
		id := agent.ResendApprovalIDOf(workflow.GetInfo(ctx).WorkflowExecution.RunID, r.base+1+i, c.ID)
		decision = &contract.Resend{ApprovalID: id, Approved: outcome == agent.ApprovalApproved, Message: message}
	})
	if decision == nil || t.canceled != nil || ctx.Err() != nil {
		// The turn ends: the unknown outcome stands, as stored.
		return res, nil
	}
	in := r.in[i]
	in.Resend = decision
	if spec, ok := t.agent.Tool(c.Name); ok && decision.Approved && agent.ScheduledKind(spec.Kind) {
		// Sent again on the team's worker, then stored in place of the
		// unknown outcome, as every kind's second delivery is.
		r.in[i] = in
		r.foreign(ctx, i, spec)
	} else {
		r.schedule(ctx, i, in)
	}
	return r.outcome(ctx, i)
}

// resendReason is what the person asked is told: what may have happened
// (what), and what each decision does.
func resendReason(what string) string {
	if what == "" {
		what = "an earlier attempt of this call may or may not have taken effect"
	}
	return "send it again? Its outcome is unknown: " + what +
		". Approve to send it a second time; reject to leave it as it is, with a reason the model reads (did it go through?)"
}

// resendOutcome is a decision's outcome on sending a call again, and
// what the model reads of it (contract.Resend.Message).
func resendOutcome(d decisionIn, timeout time.Duration) (string, string) {
	who := d.Approver
	if who == "" {
		who = "a reviewer"
	}
	switch {
	case d.via == agent.ViaTimeout:
		return agent.ApprovalTimedOut, fmt.Sprintf("no one decided within the approval timeout of %s whether to send it again; it was not sent again", timeout)
	case d.via == agent.ViaCancel:
		return agent.ApprovalCanceled, "the turn was cancelled before anyone decided whether to send it again; it was not sent again"
	case !d.Approved:
		message := who + " was asked whether to send it again and decided not to"
		if d.Reason != "" {
			message += ": " + d.Reason
		}
		return agent.ApprovalRejected, message
	}
	return agent.ApprovalApproved, who + " approved sending it again after its first outcome was unknown; this is the outcome of that second delivery"
}
