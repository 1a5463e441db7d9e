package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
	"github.com/agentflow/agentflow/internal/words"
)

// waits is the component for everything that waits for a person: tool
// calls waiting for approval and ask_user calls waiting for an answer
// (question.go), the same shape — a call held in its round, a pending
// entry a query lists, a decision by signal or update from someone with
// the right role, until a deadline or the turn's cancellation.
type waits struct {
	t    *turn // the core: its request, agent, deadline, log and cancellation
	appr approvals
	asks questions
}

// start registers the approve and answer signals and updates and the
// pending_approvals and pending_questions queries. Nothing waits at a
// step boundary, where the turn continues as new, so nothing is carried;
// remembered approvals are stored, not carried.
func (w *waits) start(ctx workflow.Context, t *turn, _ *contract.TurnCarry) error {
	w.t = t
	if err := w.startApprovals(ctx); err != nil {
		return err
	}
	return w.startQuestions(ctx)
}

func (w *waits) carry(*contract.TurnCarry) error { return nil }

// approvals is a turn's human-in-the-loop state.
type approvals struct {
	pending []agent.PendingApproval // waiting, in the model's order
	decided []string                // call ids decided in this turn
	inbox   []decisionIn            // decisions not yet acted on
	// decidedIDs holds the approval ids of the calls decided: a
	// decision naming another call's is refused.
	decidedIDs []string
}

type decisionIn struct {
	agent.ApprovalDecision
	via string // agent.ViaSignal, ViaUpdate, ViaTimeout, ViaCancel or ViaGrant
	// grant is the grant that decides the call (via ViaGrant).
	grant *agent.Grant
}

// startApprovals registers the approve signal and update and the
// pending_approvals query.
func (w *waits) startApprovals(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryPendingApprovals, func() ([]agent.PendingApproval, error) {
		return append([]agent.PendingApproval{}, w.appr.pending...), nil
	}, workflow.QueryHandlerOptions{Description: "tool calls waiting for approval"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateApprove,
		func(ctx workflow.Context, d agent.ApprovalDecision) (contract.ApprovalAck, error) {
			p, err := w.offer(d, agent.ViaUpdate)
			if err != nil {
				return contract.ApprovalAck{}, contract.Failure(err)
			}
			ack := contract.ApprovalAck{CallID: d.CallID, Outcome: outcomeOf(d), ApprovalID: p.ApprovalID}
			if d.Remembers() {
				ack.GrantID = agent.GrantIDOf(p.ApprovalID)
			}
			return ack, nil
		},
		workflow.UpdateHandlerOptions{
			Validator: func(_ workflow.Context, d agent.ApprovalDecision) error {
				if err := d.Complete(); err != nil {
					return contract.Failure(err)
				}
				_, err := w.checkDecision(d)
				return contract.Failure(err)
			},
			Description: `decide a tool call waiting for approval: {"call_id","approved","reason","approver"}, ` +
				`and optionally "approval_id" (the pending call's, which binds the decision to it) and "scope" ` +
				`(call, turn or session), "match", "expires_in_sec" (to remember an approval)`,
		}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannelWithOptions(ctx, contract.SignalApprove, workflow.SignalChannelOptions{
		Description: `decide a tool call waiting for approval: {"call_id","approved","reason","approver"}`,
	})
	signals.Serve(ctx, ch, contract.SignalApprove, func(c workflow.Context, d agent.ApprovalDecision) error {
		if err := w.complete(c, d); err != nil {
			return err
		}
		_, err := w.offer(d, agent.ViaSignal)
		return err
	})
	return nil
}

func outcomeOf(d agent.ApprovalDecision) string {
	if d.Approved {
		return agent.ApprovalApproved
	}
	return agent.ApprovalRejected
}

// complete refuses a signalled decision that does not say what it decides
// or who decided. (The update's validator refuses those before they are
// accepted, so its handler needs no such check.)
func (w *waits) complete(ctx workflow.Context, d agent.ApprovalDecision) error {
	err := d.Complete()
	return err
}

// checkDecision refuses decisions on calls that are not waiting, and
// returns the waiting call a decision decides.
func (w *waits) checkDecision(d agent.ApprovalDecision) (agent.PendingApproval, error) {
	if err := d.Validate(); err != nil {
		return agent.PendingApproval{}, err
	}
	return w.checkBound(d)
}

// checkBound finds the call a decision decides: the call waiting now
// with the decision's call id is the one decided, when the decision names its approval id or
// none; a decision whose approval id is another call's — another turn's,
// an earlier step's, an earlier run's — decides nothing.
func (w *waits) checkBound(d agent.ApprovalDecision) (agent.PendingApproval, error) {
	if d.ApprovalID != "" && slices.Contains(w.appr.decidedIDs, d.ApprovalID) {
		return agent.PendingApproval{}, agent.Errorf(agent.CodeConflict, "tool call %q (approval %s) was already decided", d.CallID, d.ApprovalID)
	}
	other := ""
	for _, p := range w.appr.pending {
		switch {
		case p.CallID != d.CallID:
		case d.ApprovalID == "" && p.Resend:
			// A decision made for the call's first approval (a retried
			// signal, say) must not send it twice.
			return agent.PendingApproval{}, agent.Errorf(agent.CodeInvalid,
				"tool call %q ran and its outcome is unknown: the decision is whether to send it again, and names its approval_id (%s)", d.CallID, p.ApprovalID)
		case d.ApprovalID == "" || d.ApprovalID == p.ApprovalID:
			return p, w.checkScope(d, p)
		default:
			other = p.ApprovalID
		}
	}
	if other != "" {
		return agent.PendingApproval{}, agent.Errorf(agent.CodeNotFound,
			"approval %s is not the one tool call %q waits with (%s): the decision was made for another call, step or run, and decides nothing",
			words.Clip(d.ApprovalID, 64), d.CallID, other)
	}
	if d.ApprovalID == "" && slices.Contains(w.appr.decided, d.CallID) {
		return agent.PendingApproval{}, agent.Errorf(agent.CodeConflict, "tool call %q was already decided", d.CallID)
	}
	return agent.PendingApproval{}, w.notWaiting(d)
}

// checkScope refuses an approval to remember that cannot be: for the
// session of a turn without one, or with a match its own call's
// arguments do not satisfy.
func (w *waits) checkScope(d agent.ApprovalDecision, p agent.PendingApproval) error {
	// Matching decodes JSON and compares it, visiting map keys in no set
	// order, which decides nothing: workflowcheck cannot tell.
	matches := d.Match.Matches(p.Args) //workflowcheck:ignore
	switch {
	case !d.Remembers():
		return nil
	case p.Resend:
		return agent.Errorf(agent.CodeInvalid, "scope %s: sending a call again is decided for that call alone; no grant remembers it", d.Scope)
	case d.Scope == agent.ScopeSession && w.t.req.SessionID == "":
		return agent.Errorf(agent.CodeInvalid, "scope session: the turn has no session; approve for the turn (scope turn) or the call alone")
	case !matches:
		return agent.Errorf(agent.CodeInvalid, "match does not hold for the arguments of the call it approves (%s)", words.Clip(string(p.Args), 200))
	}
	return nil
}

// notWaiting is the refusal of a decision on a call that does not wait.
func (w *waits) notWaiting(d agent.ApprovalDecision) error {
	return noneWaits(fmt.Sprintf("no tool call %q is waiting for approval", d.CallID), "none is",
		w.appr.pending, func(p agent.PendingApproval) string { return p.CallID })
}

// noneWaits is CodeNotFound for a decision or an answer that names a
// call nothing waits for (msg), listing the calls that wait, or none.
func noneWaits[P any](msg, none string, pending []P, callID func(P) string) error {
	if len(pending) == 0 {
		return agent.Errorf(agent.CodeNotFound, "%s (%s)", msg, none)
	}
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = callID(p)
	}
	return agent.Errorf(agent.CodeNotFound, "%s (waiting: %s)", msg, strings.Join(ids, ", "))
}

// offer takes a decision for the waiting loop; the call counts as decided
// at once, so that a second decision is refused.
func (w *waits) offer(d agent.ApprovalDecision, via string) (agent.PendingApproval, error) {
	p, err := w.checkDecision(d)
	if err != nil {
		return p, err
	}
	w.take(p, decisionIn{ApprovalDecision: d, via: via})
	return p, nil
}

// take counts waiting call p as decided by d, for the waiting loop. In a
// bound run the decision names p's approval id, which the loop takes it
// by: two calls of a round may have one call id.
func (w *waits) take(p agent.PendingApproval, d decisionIn) {
	w.appr.decided = append(w.appr.decided, p.CallID)
	w.appr.decidedIDs = append(w.appr.decidedIDs, p.ApprovalID)
	d.ApprovalID = p.ApprovalID
	w.appr.inbox = append(w.appr.inbox, d)
}

// awaitApprovals waits for a decision on each waiting call, at most the
// agent's approval timeout, and calls decide with its outcome in the order
// decisions arrive. With resend, the calls ran and their outcome is
// unknown: the decision is whether to send them again (resend.go).
func (w *waits) awaitApprovals(ctx workflow.Context, base int, calls []agent.ToolCall, waiting []int, needs []contract.ApprovalNeed,
	limits agent.Limits, resend bool, decide func(i int, outcome, message string)) {
	timeout := time.Duration(limits.ApprovalTimeoutSec) * time.Second
	deadline := w.requestApprovals(ctx, base, calls, waiting, needs, timeout, resend)
	// running: RUNNING is logged, before the last decided call starts.
	running := false
	for len(w.appr.pending) > 0 {
		if !w.awaitDecisions(ctx, deadline) {
			return
		}
		inbox := w.appr.inbox
		w.appr.inbox = nil
		for _, d := range inbox {
			i, p, ok := w.takePending(ctx, base, calls, d.ApprovalDecision)
			if !ok {
				continue
			}
			outcome, message := decisionOutcome(d, timeout)
			if p.Resend {
				outcome, message = resendOutcome(d, timeout)
			}
			w.recordDecision(ctx, p, d, outcome)
			if len(w.appr.pending) == 0 {
				// No call waits any more: the turn runs again before
				// the last call decided starts.
				w.t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
				running = true
			}
			decide(i, outcome, message)
		}
	}
	if !running {
		w.t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	}
}

// requestApprovals makes the waiting calls pending, logs an
// approval_required for each and WAITING_APPROVAL, and returns their
// deadline. With resend, each asks whether to send its call again.
func (w *waits) requestApprovals(ctx workflow.Context, base int, calls []agent.ToolCall, waiting []int, needs []contract.ApprovalNeed,
	timeout time.Duration, resend bool) time.Time {
	now := workflow.Now(ctx)
	deadline := now.Add(timeout)
	var names []string
	for _, i := range waiting {
		c := calls[i]
		p := agent.PendingApproval{CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments), RequestedAt: now, Deadline: deadline, Resend: resend}
		p.ApprovalID = approvalIDOf(ctx, base+1+i, c.ID, resend)
		w.appr.pending = append(w.appr.pending, p)
		w.t.emit(ctx, agent.Event{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{
			CallID: c.ID, Name: c.Name, Args: argsJSON(c.Arguments), Reason: reasonFor(needs, c.ID), Deadline: &deadline,
			ApprovalID: p.ApprovalID, Resend: resend,
		}})
		names = append(names, fmt.Sprintf("%s (call %s)", c.Name, c.ID))
	}
	w.t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval})
	what := "waiting for approval: "
	if resend {
		what = "waiting for approval to send again (outcome unknown): "
	}
	workflow.SetCurrentDetails(ctx, what+strings.Join(names, ", "))
	return deadline
}

// approvalIDOf is the approval id of call callID of step seq of the
// turn's run: of its first approval, or of the decision whether to send
// it again (resend).
func approvalIDOf(ctx workflow.Context, seq int, callID string, resend bool) string {
	runID := workflow.GetInfo(ctx).WorkflowExecution.RunID
	if resend {
		return agent.ResendApprovalIDOf(runID, seq, callID)
	}
	return agent.ApprovalIDOf(runID, seq, callID)
}

// awaitDecisions waits until a decision is in the inbox, the deadline
// passes (every call still pending times out) or the turn is cancelled
// (every call no one decided closes); false when the turn ended first
// (its timeout), with nothing pending any more.
func (w *waits) awaitDecisions(ctx workflow.Context, deadline time.Time) bool {
	if len(w.appr.inbox) == 0 && w.t.canceled == nil {
		remaining := deadline.Sub(workflow.Now(ctx))
		got := false
		if remaining > 0 {
			var err error
			got, err = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
				Timeout:      remaining,
				TimerOptions: workflow.TimerOptions{Summary: "approval deadline"},
			}, func() bool { return len(w.appr.inbox) > 0 || w.t.canceled != nil })
			if err != nil && !w.t.cancelled(ctx) {
				w.appr.pending = nil // the turn ended: its timeout
				return false
			}
		}
		if !got && w.t.canceled == nil {
			for _, p := range w.appr.pending {
				w.take(p, decisionIn{ApprovalDecision: agent.ApprovalDecision{CallID: p.CallID}, via: agent.ViaTimeout})
			}
		}
	}
	if w.t.canceled != nil {
		for _, p := range w.appr.pending {
			if !w.isDecided(p) {
				w.take(p, decisionIn{ApprovalDecision: agent.ApprovalDecision{CallID: p.CallID}, via: agent.ViaCancel})
			}
		}
	}
	return true
}

// recordDecision records the decision on call p (its audit, and the grant
// it makes, which then decides the round's calls it covers) and logs
// approval_decided.
func (w *waits) recordDecision(ctx workflow.Context, p agent.PendingApproval, d decisionIn, outcome string) {
	rec := agent.ApprovalRecord{
		TenantID: w.t.req.TenantID, JobID: w.t.req.JobID, CallID: p.CallID, Tool: p.Tool, Args: p.Args,
		Outcome: outcome, Reason: d.Reason, Approver: d.Approver, Via: d.via,
		RequestedAt: p.RequestedAt, DecidedAt: workflow.Now(ctx),
		ApprovalID: p.ApprovalID, ApproverIssuer: d.ApproverIssuer, ApproverSubject: d.ApproverSubject, Resend: p.Resend,
	}
	if d.grant != nil {
		rec.GrantID = d.grant.ID
	}
	made := w.grantOf(d.ApprovalDecision, p, rec.DecidedAt)
	if made != nil {
		rec.Grant, rec.GrantID = made, made.ID
	}
	// Recorded even when the turn is ending (its timeout, a cancel).
	rctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := dbStep(rctx, contract.RecordApproval, w.t.deadline, rec, nil); err != nil {
		// The decision stands (it is in the history); only its record is missing.
		workflow.GetLogger(ctx).Error("record approval", "call_id", p.CallID, "error", err.Error())
	}
	w.t.meter().recordApproval(ctx, p.Tool, outcome, rec.DecidedAt.Sub(p.RequestedAt))
	if made != nil {
		// The calls of the round that wait still and that the new grant
		// covers are decided by it, after this one.
		w.grantWaiting(made)
	}
	w.t.emit(ctx, agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: p.CallID, Name: p.Tool},
		Approval: &agent.ApprovalEvent{Outcome: outcome, Approver: d.Approver, Reason: d.Reason, Via: d.via, GrantID: rec.GrantID}})
}

// decisionOutcome is a decision's outcome, and what the model reads of
// a call that does not run.
func decisionOutcome(d decisionIn, timeout time.Duration) (string, string) {
	switch {
	case d.via == agent.ViaTimeout:
		return agent.ApprovalTimedOut, fmt.Sprintf("no decision on the call within the approval timeout of %s; it was not run", timeout)
	case d.via == agent.ViaCancel:
		return agent.ApprovalCanceled, "the turn was cancelled before the call was decided; it was not run"
	case d.via == agent.ViaGrant:
		return agent.ApprovalApproved, ""
	case !d.Approved:
		who := d.Approver
		if who == "" {
			who = "a reviewer"
		}
		message := fmt.Sprintf("the call was rejected by %s and not run", who)
		if d.Reason != "" {
			message += ": " + d.Reason
		}
		return agent.ApprovalRejected, message
	}
	return agent.ApprovalApproved, ""
}

// isDecided reports whether waiting call p has a decision.
func (w *waits) isDecided(p agent.PendingApproval) bool {
	return slices.Contains(w.appr.decidedIDs, p.ApprovalID)
}

// grantOf is the grant an approval of waiting call p makes at now, when
// its scope is the turn or the session; nil otherwise.
func (w *waits) grantOf(d agent.ApprovalDecision, p agent.PendingApproval, now time.Time) *agent.Grant {
	if !d.Remembers() || p.ApprovalID == "" {
		return nil
	}
	g := &agent.Grant{
		ID: agent.GrantIDOf(p.ApprovalID), TenantID: w.t.req.TenantID, Scope: d.Scope, SessionID: w.t.req.SessionID,
		JobID: w.t.req.JobID, AgentID: w.t.agent.ID, Tool: p.Tool, Match: d.Match, CallID: p.CallID, ApprovalID: p.ApprovalID,
		Approver: d.Approver, ApproverIssuer: d.ApproverIssuer, ApproverSubject: d.ApproverSubject, Reason: d.Reason,
		CreatedAt: now,
	}
	if d.ExpiresInSec > 0 {
		at := now.Add(time.Duration(d.ExpiresInSec) * time.Second)
		g.ExpiresAt = &at
	}
	return g
}

// grantWaiting decides by grant g the calls that wait undecided and that
// it covers: the same tool, arguments that match. (A grant is the
// turn's, its agent's and its session's; so are the calls that wait.)
func (w *waits) grantWaiting(g *agent.Grant) {
	for _, p := range w.appr.pending {
		if p.Tool != g.Tool || w.isDecided(p) || p.Resend {
			// A call is sent again by a person's decision alone.
			continue
		}
		// (Matches is deterministic: see checkScope.)
		matches := g.Match.Matches(p.Args) //workflowcheck:ignore
		if !matches {
			continue
		}
		w.take(p, decisionIn{ApprovalDecision: agent.ApprovalDecision{CallID: p.CallID, Approved: true,
			Approver: g.Approver, ApproverIssuer: g.ApproverIssuer, ApproverSubject: g.ApproverSubject, Reason: g.Reason},
			via: agent.ViaGrant, grant: g})
	}
}

// decideByGrants starts the calls of a round that a grant decides (their
// need names it, contract.ApprovalNeed.Grant): each is recorded as
// approved by the grant, and logged so, and does not wait. The rest are
// returned, to wait for a person.
func (w *waits) decideByGrants(ctx workflow.Context, base int, calls []agent.ToolCall, waiting []int, needs []contract.ApprovalNeed,
	decide func(i int, outcome, message string)) []int {
	var rest []int
	for _, i := range waiting {
		c := calls[i]
		g := grantFor(needs, c.ID)
		if g == nil {
			rest = append(rest, i)
			continue
		}
		now := workflow.Now(ctx)
		rec := agent.ApprovalRecord{
			TenantID: w.t.req.TenantID, JobID: w.t.req.JobID, CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments),
			Outcome: agent.ApprovalApproved, Reason: g.Reason, Approver: g.Approver, Via: agent.ViaGrant,
			RequestedAt: now, DecidedAt: now, ApprovalID: agent.ApprovalIDOf(workflow.GetInfo(ctx).WorkflowExecution.RunID, base+1+i, c.ID),
			ApproverIssuer: g.ApproverIssuer, ApproverSubject: g.ApproverSubject, GrantID: g.ID,
		}
		rctx, _ := workflow.NewDisconnectedContext(ctx)
		if err := dbStep(rctx, contract.RecordApproval, w.t.deadline, rec, nil); err != nil {
			workflow.GetLogger(ctx).Error("record approval", "call_id", c.ID, "error", err.Error())
		}
		w.t.meter().recordApproval(ctx, c.Name, agent.ApprovalApproved, 0)
		w.t.emit(ctx, agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: c.ID, Name: c.Name},
			Approval: &agent.ApprovalEvent{Outcome: agent.ApprovalApproved, Approver: g.Approver, Reason: g.Reason, Via: agent.ViaGrant, GrantID: g.ID}})
		decide(i, agent.ApprovalApproved, "")
	}
	return rest
}

// grantFor is the grant that decides call callID, if its need names one.
func grantFor(needs []contract.ApprovalNeed, callID string) *agent.Grant {
	for _, n := range needs {
		if n.CallID == callID {
			return n.Grant
		}
	}
	return nil
}

// takePending removes the call a decision decides from the waiting list
// and returns its index among the model's calls: in a bound run the call
// waiting with the decision's approval id, otherwise the first with its
// call id.
func (w *waits) takePending(ctx workflow.Context, base int, calls []agent.ToolCall, d agent.ApprovalDecision) (int, agent.PendingApproval, bool) {
	for k, p := range w.appr.pending {
		if p.CallID != d.CallID || p.ApprovalID != d.ApprovalID {
			continue
		}
		w.appr.pending = append(w.appr.pending[:k:k], w.appr.pending[k+1:]...)
		for i, c := range calls {
			if c.ID == d.CallID && approvalIDOf(ctx, base+1+i, c.ID, p.Resend) == p.ApprovalID {
				return i, p, true
			}
		}
	}
	return 0, agent.PendingApproval{}, false
}
