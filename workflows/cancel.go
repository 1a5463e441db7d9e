package workflows

import (
	"encoding/json"
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
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
	t *turn // the core: its child turns and steered messages
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
	s.t = t
	s.cancelCh = workflow.GetSignalChannelWithOptions(ctx, contract.SignalCancelTurn, workflow.SignalChannelOptions{
		Description: `cancel the turn: {"reason","requested_by"} (both optional)`,
	})
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			// Raw JSON, so that a malformed signal is logged, not fatal.
			var raw json.RawMessage
			s.cancelCh.Receive(c, &raw)
			s.takeCancel(c, raw)
		}
	})
	return nil
}

func (s *stopper) carry(*contract.TurnCarry) error { return nil }

// loaded stops a turn cancelled while it routed and loaded its agent,
// before its search attributes were set: it runs no prepare phase and no
// step.
func (s *stopper) loaded(ctx workflow.Context) (*agent.TurnError, error) {
	if s.cancelled(ctx) {
		return s.cancelError(), nil
	}
	return nil, nil
}

// drainCancels takes the cancellations received and not yet taken: a run
// about to continue as new must not leave one behind.
func (s *stopper) drainCancels(ctx workflow.Context) {
	signals.Drain(s.cancelCh, func(raw json.RawMessage) { s.takeCancel(ctx, raw) })
}

// takeCancel acts on one cancel_turn signal.
func (s *stopper) takeCancel(ctx workflow.Context, raw json.RawMessage) {
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
	s.requestCancel(ctx, req)
}

// requestCancel records the first cancellation and stops the model call,
// the tool calls and the child turns in flight.
func (s *stopper) requestCancel(ctx workflow.Context, req agent.CancelRequest) {
	if s.canceled != nil {
		return
	}
	s.canceled = &req
	workflow.GetLogger(ctx).Info("turn cancelled", "requested_by", req.RequestedBy, "reason", req.Reason)
	if req.AtBoundary {
		// What runs finishes; the turn stops at its next step boundary
		// (loop).
		return
	}
	if s.stopModel != nil {
		s.stopModel()
	}
	if s.stopTools != nil {
		s.stopTools()
	}
	s.t.stopDelegations()
}

// cancelled reports whether the turn is cancelled: by the signal, or by
// a cancellation of the workflow, which it then records. A context ended
// by the turn's own timeout is not a cancellation.
func (s *stopper) cancelled(ctx workflow.Context) bool {
	if s.canceled == nil && ctx.Err() != nil && !s.timedOut {
		s.requestCancel(ctx, temporalCancel)
	}
	return s.canceled != nil
}

// cancelError is the turn's failure once it is cancelled.
func (s *stopper) cancelError() *agent.TurnError {
	return agent.TurnErrorOf(agent.Errorf(agent.CodeCanceled, "%s", s.canceled.Message()))
}

// awaitStop waits, after a model call failed with err, for what stopped
// it from outside the workflow task, so that the turn acts on the cause
// rather than on the call's failure. A call interrupted on the live path
// (contract.IsInterrupted) was stopped for a cancel_turn signal, which
// the gateway sends first, or for a message steered in, which the turn
// itself interrupts the call for (awaitModel): the turn takes the
// cancellation if one came, else goes on with the messages. A regular
// call's cause is in the history before its failure; a local call waits
// for it. A local call that ran out the turn's time (ScheduleToClose)
// waits for the turn's timeout. A local call's cause is in the workflow's
// next task, which the call's end brings at once: the wait adds no time,
// and nothing to the history but the wait's own events. A call stopped by
// the turn itself finds its cause already here; any other failure does
// not wait. The wait ends at the turn's timeout at the latest.
func (s *stopper) awaitStop(ctx workflow.Context, err error, local bool) {
	if s.canceled != nil || ctx.Err() != nil {
		return
	}
	var timeout *temporal.TimeoutError
	switch {
	case contract.IsInterrupted(err):
		// The cancel_turn signal came before the failure; its goroutine
		// may not have taken it yet.
		s.drainCancels(ctx)
		if local {
			_ = workflow.Await(ctx, func() bool {
				return s.canceled != nil || ctx.Err() != nil || len(s.t.inbox) > 0 || s.t.steer.Len() > 0
			})
		}
		return
	case contract.ErrorOf(err).Code == agent.CodeCanceled:
	case errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE && local:
	default:
		return
	}
	_ = workflow.Await(ctx, func() bool { return s.canceled != nil || ctx.Err() != nil })
}
