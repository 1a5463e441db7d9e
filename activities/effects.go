package activities

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
)

// unknownPrefix marks a stored tool result whose outcome is unknown
// (agent.ToolUnknown), for the model and for a retried attempt that
// reads the step back.
const unknownPrefix = "unknown outcome: "

// unknownOutcome is what the model reads of a call whose write may or
// may not have taken effect: what happened, the call as it was made,
// and what to do about it.
type unknownOutcome struct {
	Outcome   string          `json:"outcome"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	What      string          `json:"what"`
	Advice    string          `json:"advice"`
}

// unknownAdvice is what the model is told to do about an unknown outcome.
const unknownAdvice = "This call may or may not have taken effect. Check whether it did (read the state it changes) before acting again; do not repeat it blindly, and tell the user if you cannot tell."

// writeOutcome is the result of a call whose at-most-once write (gate;
// nil for an idempotent tool) did not end in the tool's own answer: a
// write an earlier attempt may have sent, held back (unknown); a write
// that left and got no answer (unknown); or a failure worth retrying
// after a write reached the far side, which is the call's error rather
// than a retry that could not send it again. ok is false for the rest,
// which the caller classifies as before.
func writeOutcome(ctx context.Context, call agent.ToolCall, gate *effects.Gate, err error) (agent.Message, string, bool) {
	if err == nil || gate == nil || ctx.Err() != nil {
		return agent.Message{}, "", false
	}
	var held *effects.MaybeSentError
	if errors.As(err, &held) {
		return unknownMessage(call, held.Error()), agent.ToolUnknown, true
	}
	sent, unanswered := gate.Sent()
	switch {
	case unanswered:
		return unknownMessage(call, "the write was sent and no answer came: "+err.Error()), agent.ToolUnknown, true
	case sent && !agent.IsCode(err, agent.CodeInvalid) && !agent.IsCode(err, agent.CodeNotFound):
		// A failure that would be retried: a retry could not send the
		// write again, so the far side's answer is the call's.
		return agent.Message{Content: err.Error() + " (the write reached the far side; it is not sent again)"}, agent.ToolError, true
	}
	return agent.Message{}, "", false
}

// unknownMessage is the model's account of a call whose outcome is
// unknown: what, and the advice, as JSON after unknownPrefix.
func unknownMessage(call agent.ToolCall, what string) agent.Message {
	args := json.RawMessage(call.Arguments)
	if !json.Valid(args) {
		args = nil
	}
	b, _ := json.Marshal(unknownOutcome{Outcome: agent.ToolUnknown, Tool: call.Name, Arguments: args, What: what, Advice: unknownAdvice})
	return agent.Message{Content: unknownPrefix + string(b)}
}
