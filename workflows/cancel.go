package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// temporalCancel is the request a cancellation of the workflow itself
// stands for.
var temporalCancel = agent.CancelRequest{RequestedBy: "temporal", Reason: "the workflow was cancelled"}

// startCancel registers the cancel_turn signal. A request stops the model
// call in flight; the turn then stops at its next safe point.
func (t *turn) startCancel(ctx workflow.Context) {
	ch := workflow.GetSignalChannelWithOptions(ctx, contract.SignalCancelTurn, workflow.SignalChannelOptions{
		Description: `cancel the turn: {"reason","requested_by"} (both optional)`,
	})
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			// Raw JSON, so that a malformed signal is logged, not fatal.
			var raw json.RawMessage
			ch.Receive(c, &raw)
			var req agent.CancelRequest
			if len(raw) > 0 {
				err := json.Unmarshal(raw, &req) //workflowcheck:ignore
				if err != nil {
					workflow.GetLogger(c).Warn("cancel_turn signal ignored: malformed", "error", err.Error())
					continue
				}
			}
			if err := req.Validate(); err != nil {
				workflow.GetLogger(c).Warn("cancel_turn signal ignored", "error", err.Error())
				continue
			}
			t.requestCancel(c, req)
		}
	})
}

// requestCancel records the first cancellation and stops the model call,
// the tool calls (runs since cancelToolsChange) and the child turns in
// flight.
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
