package eventlog

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
)

// Closing is what a turn logs last, once its result is stored, from that
// result: a completed turn's answer, block by block (one stored before
// blocks were kept, by its text), then COMPLETED; a stopped turn's
// partial answer, if any, then CANCELED; a failed turn's error, then
// FAILED. The events have no stream or index: the log gives them theirs.
//
// One function for both sides: the turn logs these events, and SaveResult
// publishes them on the live path before the turn has closed, as the
// events the log will hold at the indices the turn gave it
// (contract.SaveResultInput.CloseFrom).
func Closing(res agent.TurnResult) []agent.Event {
	var out []agent.Event
	content := func(raw json.RawMessage) {
		out = append(out, agent.Event{Kind: agent.EventContent, Content: raw})
	}
	switch res.Status {
	case agent.StatusCompleted:
		if len(res.Blocks) == 0 {
			content(textBlock(res.Output))
		}
		for _, b := range res.Blocks {
			content(blockJSON(b))
		}
		return append(out, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
	case agent.StatusCanceled:
		if res.Partial {
			for _, b := range res.Blocks {
				content(blockJSON(b))
			}
		}
		return append(out, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: closingError(res)})
	default:
		e := closingError(res)
		return append(out, agent.Event{Kind: agent.EventError, Error: e},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: e})
	}
}

// closingError is the error a turn that did not complete ends with.
func closingError(res agent.TurnResult) *agent.TurnError {
	if res.Error == nil {
		return &agent.TurnError{Type: agent.ErrTypeInternal, Message: "turn failed without an error"}
	}
	return res.Error
}

// textBlock is the content block of a text answer.
func textBlock(s string) json.RawMessage {
	// Marshalling a struct of strings is deterministic.
	out, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", s}) //workflowcheck:ignore
	return out
}

// blockJSON is a content event's block.
func blockJSON(b agent.Block) json.RawMessage {
	// Marshalling a struct of strings and raw JSON is deterministic.
	out, _ := json.Marshal(b) //workflowcheck:ignore
	return out
}
