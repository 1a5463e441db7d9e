package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
)

// temporalCancel is the request a cancellation of the workflow itself
// stands for.
var temporalCancel = agent.CancelRequest{RequestedBy: "temporal", Reason: "the workflow was cancelled"}

// stopper is the turn's cancellation: the signal, the request taken, and
// what stops the work in flight.
type stopper struct {
	// cancelCh receives cancel_turn; canceled is the cancellation asked
	// for, if any; stopModel stops the model call in flight, stopTools the
	// tool calls in flight.
	cancelCh  workflow.ReceiveChannel
	canceled  *agent.CancelRequest
	stopModel workflow.CancelFunc
	stopTools workflow.CancelFunc
	timedOut  bool // the turn's timeout ended its run
	// partial is what the model call a cancellation stopped had streamed:
	// the turn's partial answer.
	partial string
}

// start registers the cancel_turn signal. A request stops the model call
// in flight; the turn then stops at its next safe point. A cancelled turn
// does not continue as new, so nothing is carried.
func (s *stopper) start(ctx workflow.Context, t *turn, _ *contract.TurnCarry) error {
	s.cancelCh = workflow.GetSignalChannelWithOptions(ctx, contract.SignalCancelTurn, workflow.SignalChannelOptions{
		Description: `cancel the turn: {"reason","requested_by"} (both optional)`,
	})
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			// Raw JSON, so that a malformed signal is logged, not fatal.
			var raw json.RawMessage
			s.cancelCh.Receive(c, &raw)
			t.takeCancel(c, raw)
		}
	})
	return nil
}

func (s *stopper) carry(*contract.TurnCarry) error { return nil }

// drainCancels takes the cancellations received and not yet taken: a run
// about to continue as new must not leave one behind.
func (t *turn) drainCancels(ctx workflow.Context) {
	signals.Drain(t.cancelCh, func(raw json.RawMessage) { t.takeCancel(ctx, raw) })
}

// takeCancel acts on one cancel_turn signal.
func (t *turn) takeCancel(ctx workflow.Context, raw json.RawMessage) {
	var req agent.CancelRequest
	if len(raw) > 0 {
		err := json.Unmarshal(raw, &req) //workflowcheck:ignore
		if err != nil {
			workflow.GetLogger(ctx).Warn("signal ignored", "signal", contract.SignalCancelTurn, "error", err.Error())
			return
		}
	}
	if err := req.Validate(); err != nil {
		workflow.GetLogger(ctx).Warn("signal ignored", "signal", contract.SignalCancelTurn, "error", err.Error())
		return
	}
	t.requestCancel(ctx, req)
}

// requestCancel records the first cancellation and stops the model call,
// the tool calls and the child turns in flight.
func (t *turn) requestCancel(ctx workflow.Context, req agent.CancelRequest) {
	if t.canceled != nil {
		return
	}
	t.canceled = &req
	workflow.GetLogger(ctx).Info("turn cancelled", "requested_by", req.RequestedBy, "reason", req.Reason)
	if req.AtBoundary {
		// What runs finishes; the turn stops at its next step boundary
		// (loop).
		return
	}
	if t.stopModel != nil {
		t.stopModel()
	}
	if t.stopTools != nil {
		t.stopTools()
	}
	t.stopDelegations()
}

// cancelled reports whether the turn is cancelled: by the signal, or by
// a cancellation of the workflow, which it then records. A context ended
// by the turn's own timeout is not a cancellation.
func (t *turn) cancelled(ctx workflow.Context) bool {
	if t.canceled == nil && ctx.Err() != nil && !t.timedOut {
		t.requestCancel(ctx, temporalCancel)
	}
	return t.canceled != nil
}

// cancelError is the turn's failure once it is cancelled.
func (t *turn) cancelError() *agent.TurnError {
	return agent.TurnErrorOf(agent.Errorf(agent.CodeCanceled, "%s", t.canceled.Message()))
}
