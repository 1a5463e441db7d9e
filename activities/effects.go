package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
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
	// Decision, on a call whose tool asks a person, is what they decided
	// when asked whether to send it again: not to (and why), or to, when
	// the second delivery's outcome is unknown too.
	Decision string `json:"decision,omitempty"`
	Advice   string `json:"advice"`
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
	if err == nil || ctx.Err() != nil {
		return agent.Message{}, "", false
	}
	if u := (*unknownCall)(nil); errors.As(err, &u) {
		return unknownMessage(call, u.what), agent.ToolUnknown, true
	}
	if gate == nil {
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

// unknownCall is a call made outside the tool runtime (on a team's own
// worker) whose outcome is unknown, and what happened to it.
type unknownCall struct{ what string }

func (e *unknownCall) Error() string { return e.what }

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

// unknownOf reads what unknownMessage wrote; the zero value for content
// that is not an unknown outcome.
func unknownOf(content string) unknownOutcome {
	var u unknownOutcome
	if rest, ok := strings.CutPrefix(content, unknownPrefix); ok {
		_ = json.Unmarshal([]byte(rest), &u)
	}
	return u
}

// undecided reports whether a stored step is an unknown outcome no one
// has decided on yet: what a person's decision on sending the call again
// replaces (ExecuteToolInput.Resend). One that carries a decision is
// that decision's result, which a retried attempt returns.
func undecided(m agent.Message) bool {
	return statusOf(m.Content) == agent.ToolUnknown && unknownOf(m.Content).Decision == ""
}

// withDecision is an unknown outcome's content with the decision taken
// on sending the call again.
func withDecision(content, decision string) string {
	u := unknownOf(content)
	if u.Outcome == "" {
		return content + " (" + decision + ")"
	}
	u.Decision = decision
	b, _ := json.Marshal(u)
	return unknownPrefix + string(b)
}

// notResent is what the model reads of a call whose outcome was unknown
// (prior, its stored step) and that a person decided not to send again:
// the unknown outcome, with the decision.
func notResent(call agent.ToolCall, prior *agent.Message, decision string) agent.Message {
	if prior == nil {
		// Nothing stored to start from (a step lost with its database):
		// the call's outcome is unknown all the same.
		return agent.Message{Content: withDecision(unknownMessage(call, "an earlier attempt of this call may have sent its write").Content, decision)}
	}
	return agent.Message{Content: withDecision(prior.Content, decision)}
}

// replaceToolResult stores msg, the result of a decision on sending a
// call again, in place of the call's unknown outcome (prev, its
// content), and returns res, its account; when another attempt replaced
// it first, what that attempt stored.
func (a *Activities) replaceToolResult(ctx context.Context, in contract.ExecuteToolInput, prev string, msg agent.Message, res contract.ExecuteToolResult) (contract.ExecuteToolResult, error) {
	var replaced bool
	err := a.db(ctx, "replace tool result", func() (err error) {
		replaced, err = a.store.ReplaceStep(ctx, in.TenantID, in.JobID, in.Seq, prev, msg)
		return err
	})
	if err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("store result of tool call %q: %w", in.Call.ID, err)
	}
	if replaced {
		return res, nil
	}
	stored, err := a.store.Step(ctx, in.TenantID, in.JobID, in.Seq)
	if err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}
	return a.toolResult(ctx, in.Call.ID, stored, statusOf(stored.Content))
}
