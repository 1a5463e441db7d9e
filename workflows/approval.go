package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// approvals is a turn's human-in-the-loop state.
type approvals struct {
	pending []agent.PendingApproval // waiting, in the model's order
	decided []string                // call ids decided in this turn
	inbox   []decisionIn            // decisions not yet acted on
}

type decisionIn struct {
	agent.ApprovalDecision
	via string // agent.ViaSignal, ViaUpdate, ViaTimeout or ViaCancel
}

// startApprovals registers the approve signal and update and the
// pending_approvals query.
func (t *turn) startApprovals(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryPendingApprovals, func() ([]agent.PendingApproval, error) {
		return append([]agent.PendingApproval{}, t.appr.pending...), nil
	}, workflow.QueryHandlerOptions{Description: "tool calls waiting for approval"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateApprove,
		func(ctx workflow.Context, d agent.ApprovalDecision) (contract.ApprovalAck, error) {
			if err := t.offer(d, agent.ViaUpdate); err != nil {
				return contract.ApprovalAck{}, contract.Failure(err)
			}
			return contract.ApprovalAck{CallID: d.CallID, Outcome: outcomeOf(d)}, nil
		},
		workflow.UpdateHandlerOptions{
			Validator: func(_ workflow.Context, d agent.ApprovalDecision) error {
				if err := d.Complete(); err != nil {
					return contract.Failure(err)
				}
				return contract.Failure(t.checkDecision(d))
			},
			Description: `decide a tool call waiting for approval: {"call_id","approved","reason","approver"}`,
		}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannelWithOptions(ctx, contract.SignalApprove, workflow.SignalChannelOptions{
		Description: `decide a tool call waiting for approval: {"call_id","approved","reason","approver"}`,
	})
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			// Raw JSON, so that a malformed signal is logged, not fatal.
			var raw json.RawMessage
			ch.Receive(c, &raw)
			var d agent.ApprovalDecision
			err := json.Unmarshal(raw, &d) //workflowcheck:ignore
			if err == nil {
				err = t.complete(c, d)
			}
			if err == nil {
				err = t.offer(d, agent.ViaSignal)
			}
			if err != nil {
				workflow.GetLogger(c).Warn("approve signal ignored", "error", err.Error())
			}
		}
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
func (t *turn) complete(ctx workflow.Context, d agent.ApprovalDecision) error {
	err := d.Complete()
	if err == nil || workflow.GetVersion(ctx, completeChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return err
}

// checkDecision refuses decisions on calls that are not waiting.
func (t *turn) checkDecision(d agent.ApprovalDecision) error {
	if err := d.Validate(); err != nil {
		return err
	}
	for _, id := range t.appr.decided {
		if id == d.CallID {
			return agent.Errorf(agent.CodeConflict, "tool call %q was already decided", d.CallID)
		}
	}
	for _, p := range t.appr.pending {
		if p.CallID == d.CallID {
			return nil
		}
	}
	ids := make([]string, len(t.appr.pending))
	for i, p := range t.appr.pending {
		ids[i] = p.CallID
	}
	if len(ids) == 0 {
		return agent.Errorf(agent.CodeNotFound, "no tool call %q is waiting for approval (none is)", d.CallID)
	}
	return agent.Errorf(agent.CodeNotFound, "no tool call %q is waiting for approval (waiting: %s)", d.CallID, strings.Join(ids, ", "))
}

// offer takes a decision for the waiting loop; the call counts as decided
// at once, so that a second decision is refused.
func (t *turn) offer(d agent.ApprovalDecision, via string) error {
	if err := t.checkDecision(d); err != nil {
		return err
	}
	t.appr.decided = append(t.appr.decided, d.CallID)
	t.appr.inbox = append(t.appr.inbox, decisionIn{ApprovalDecision: d, via: via})
	return nil
}

// awaitApprovals waits for a decision on each waiting call, at most the
// agent's approval timeout, and calls decide with its outcome in the order
// decisions arrive.
func (t *turn) awaitApprovals(ctx workflow.Context, calls []agent.ToolCall, waiting []int, needs []contract.ApprovalNeed,
	limits agent.Limits, decide func(i int, outcome, message string)) {
	now := workflow.Now(ctx)
	timeout := time.Duration(limits.ApprovalTimeoutSec) * time.Second
	deadline := now.Add(timeout)
	var names []string
	for _, i := range waiting {
		c := calls[i]
		t.appr.pending = append(t.appr.pending, agent.PendingApproval{
			CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments), RequestedAt: now, Deadline: deadline,
		})
		t.emit(ctx, agent.Event{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{
			CallID: c.ID, Name: c.Name, Args: argsJSON(c.Arguments), Reason: reasonFor(needs, c.ID), Deadline: &deadline,
		}})
		names = append(names, fmt.Sprintf("%s (call %s)", c.Name, c.ID))
	}
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval})
	workflow.SetCurrentDetails(ctx, "waiting for approval: "+strings.Join(names, ", "))

	// running: RUNNING is logged, before the last decided call starts.
	running := false
	for len(t.appr.pending) > 0 {
		if len(t.appr.inbox) == 0 && t.canceled == nil {
			remaining := deadline.Sub(workflow.Now(ctx))
			got := false
			if remaining > 0 {
				var err error
				got, err = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
					Timeout:      remaining,
					TimerOptions: workflow.TimerOptions{Summary: "approval deadline"},
				}, func() bool { return len(t.appr.inbox) > 0 || t.canceled != nil })
				if err != nil && !t.cancelled(ctx) {
					t.appr.pending = nil // the turn ended: its timeout
					return
				}
			}
			if !got && t.canceled == nil {
				for _, p := range t.appr.pending {
					t.appr.decided = append(t.appr.decided, p.CallID)
					t.appr.inbox = append(t.appr.inbox, decisionIn{ApprovalDecision: agent.ApprovalDecision{CallID: p.CallID}, via: agent.ViaTimeout})
				}
			}
		}
		if t.canceled != nil {
			// Close every call that no one decided.
			for _, p := range t.appr.pending {
				if !slices.Contains(t.appr.decided, p.CallID) {
					t.appr.decided = append(t.appr.decided, p.CallID)
					t.appr.inbox = append(t.appr.inbox, decisionIn{ApprovalDecision: agent.ApprovalDecision{CallID: p.CallID}, via: agent.ViaCancel})
				}
			}
		}
		inbox := t.appr.inbox
		t.appr.inbox = nil
		for _, d := range inbox {
			i, p, ok := t.takePending(calls, d.CallID)
			if !ok {
				continue
			}
			outcome, message := outcomeOf(d.ApprovalDecision), ""
			switch {
			case d.via == agent.ViaTimeout:
				outcome, message = agent.ApprovalTimedOut, fmt.Sprintf("no decision on the call within the approval timeout of %s; it was not run", timeout)
			case d.via == agent.ViaCancel:
				outcome, message = agent.ApprovalCanceled, "the turn was cancelled before the call was decided; it was not run"
			case !d.Approved:
				who := d.Approver
				if who == "" {
					who = "a reviewer"
				}
				message = fmt.Sprintf("the call was rejected by %s and not run", who)
				if d.Reason != "" {
					message += ": " + d.Reason
				}
			}
			rec := agent.ApprovalRecord{
				TenantID: t.req.TenantID, JobID: t.req.JobID, CallID: p.CallID, Tool: p.Tool, Args: p.Args,
				Outcome: outcome, Reason: d.Reason, Approver: d.Approver, Via: d.via,
				RequestedAt: p.RequestedAt, DecidedAt: workflow.Now(ctx),
			}
			// Recorded even when the turn is ending (its timeout, a cancel).
			rctx, _ := workflow.NewDisconnectedContext(ctx)
			if err := dbStep(rctx, contract.RecordApproval, t.deadline, rec, nil); err != nil {
				// The decision stands (it is in the history); only its record is missing.
				workflow.GetLogger(ctx).Error("record approval", "call_id", p.CallID, "error", err.Error())
			}
			t.recordApproval(ctx, p.Tool, outcome, rec.DecidedAt.Sub(p.RequestedAt))
			if t.vocab == vocabNew {
				t.emit(ctx, agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: p.CallID, Name: p.Tool},
					Approval: &agent.ApprovalEvent{Outcome: outcome, Approver: d.Approver, Reason: d.Reason, Via: d.via}})
				if len(t.appr.pending) == 0 {
					// No call waits any more: the turn runs again before
					// the last call decided starts.
					t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
					running = true
				}
			}
			decide(i, outcome, message)
		}
	}
	if !running {
		t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	}
}

// takePending removes a call from the waiting list and returns its index
// among the model's calls.
func (t *turn) takePending(calls []agent.ToolCall, callID string) (int, agent.PendingApproval, bool) {
	for k, p := range t.appr.pending {
		if p.CallID != callID {
			continue
		}
		t.appr.pending = append(t.appr.pending[:k:k], t.appr.pending[k+1:]...)
		for i, c := range calls {
			if c.ID == callID {
				return i, p, true
			}
		}
	}
	return 0, agent.PendingApproval{}, false
}
