package a2a

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// a2aTask is an A2A task made from its turn's projection
// (internal/gateway/projection, Held: a model call's text once it has
// answered), item by item:
//
//	status RUNNING                      working
//	status RETRYING                     working ("the model call is retried")
//	a call's start, its result          working ("calling the tool …", "the tool … ended ok")
//	input required: an approval         input-required (which call, and how to approve it)
//	input required: a question          input-required (the question, and how to answer it)
//	input resolved                      working ("the call … was approved")
//	answer (text, JSON blocks)          artifact "answer": text and data parts
//	answer (image, file blocks)         artifact "answer": file parts, by cas:// ref
//	end: completed                      completed (final)
//	end: failed                         failed, or rejected when the request was refused; the error's message
//	end: canceled                       canceled
//
// Events of delegated child turns are the child's and are left out.
type a2aTask struct {
	id, contextID string
	p             *projection.Projection

	state   a2a.TaskState
	message *a2a.Message
	parts   []a2a.Part
	text    strings.Builder // the answer's tokens, for a log without content blocks
}

func newA2ATask(streamID, contextID string) *a2aTask {
	return &a2aTask{id: streamID, contextID: contextID, state: a2a.TaskStateSubmitted, p: projection.New(projection.Held)}
}

// task is the task as it is now.
func (t *a2aTask) task() *a2a.Task {
	out := &a2a.Task{ID: a2a.TaskID(t.id), ContextID: t.contextID,
		Status:   a2a.TaskStatus{State: t.state, Message: t.message},
		Metadata: map[string]any{"agentflow/stream_id": t.id}}
	if len(t.parts) > 0 {
		out.Artifacts = []*a2a.Artifact{{ID: a2aArtifact, Name: a2aArtifact, Parts: append(a2a.ContentParts(nil), t.parts...)}}
	}
	return out
}

// apply folds e into the task and returns the updates it makes.
func (t *a2aTask) apply(e agent.Event) []a2a.Event {
	var out []a2a.Event
	for _, it := range t.p.Add(e) {
		out = append(out, t.item(it)...)
	}
	return out
}

func (t *a2aTask) item(it projection.Item) []a2a.Event {
	e := it.Event
	switch it.Kind {
	case projection.Status:
		return t.status(it)
	case projection.End:
		return t.end(it)
	case projection.ToolStart:
		return t.update(e, a2a.TaskStateWorking, "calling the tool "+toolName(e))
	case projection.ToolResult:
		return t.update(e, a2a.TaskStateWorking, "the tool "+toolName(e)+" ended "+toolStatus(e))
	case projection.InputRequired:
		if it.Question != nil {
			q := it.Question
			msg := q.Text
			if len(q.Choices) > 0 {
				msg += " (choices: " + strings.Join(q.Choices, ", ") + ")"
			}
			return t.update(e, a2a.TaskStateInputRequired, fmt.Sprintf("%s — answer with a message for this task, or POST /v1/%s/questions/%s {\"answer\"} (%s role)",
				msg, t.id, it.Tool.CallID, q.Role))
		}
		return t.update(e, a2a.TaskStateInputRequired, fmt.Sprintf(
			"the call %s of the tool %s waits for a person's approval (approver role): answer with a message for this task, {\"approved\": true|false} as data or the text approve or reject, or POST /v1/%s/approvals/%s {\"approval_id\": %q, \"approved\"}",
			it.Tool.CallID, toolName(e), t.id, it.Tool.CallID, it.Tool.ApprovalID))
	case projection.InputResolved:
		if it.Question != nil {
			return t.update(e, a2a.TaskStateWorking, "the question "+it.Tool.CallID+" was "+it.Question.Outcome)
		}
		outcome := "decided"
		if e.Approval != nil {
			outcome = e.Approval.Outcome
		}
		return t.update(e, a2a.TaskStateWorking, "the call "+it.Tool.CallID+" of the tool "+toolName(e)+" was "+outcome)
	case projection.Delta:
		if e.Kind == agent.EventToken {
			t.text.WriteString(it.Text)
		}
	case projection.Answer:
		b, ok := projection.Block(e)
		if !ok {
			return nil
		}
		switch b.Type {
		case agent.BlockText:
			return t.artifact(a2a.TextPart{Text: b.Text})
		case agent.BlockJSON:
			return t.artifact(dataPart(b.JSON))
		case agent.BlockCitation:
			// A chunk the answer cites: a data part of the answer's
			// artifact, marked so in its metadata.
			if _, ok := b.Citation(); ok {
				p := dataPart(b.JSON).(a2a.DataPart)
				p.Metadata = map[string]any{"kind": agent.BlockCitation}
				return t.artifact(p)
			}
		case agent.BlockImage, agent.BlockFile:
			// Data the turn produced, by its tenant's cas:// ref (read with
			// GET /v1/files/{ref} and the same token).
			if b.Ref != "" {
				return t.artifact(a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{MimeType: b.MIMEType, Name: b.Name}, URI: b.Ref}})
			}
		}
	}
	return nil
}

// status folds a status that is not the turn's end.
func (t *a2aTask) status(it projection.Item) []a2a.Event {
	e := it.Event
	switch it.Status {
	case agent.StreamRunning:
		return t.update(e, a2a.TaskStateWorking, "")
	case agent.StreamRetrying:
		t.text.Reset()
		return t.update(e, a2a.TaskStateWorking, "the model call is retried")
	case agent.StreamWaitingApproval:
		if t.state == a2a.TaskStateInputRequired {
			return nil
		}
		return t.update(e, a2a.TaskStateInputRequired, "a call waits for a person's approval")
	case agent.StreamWaitingInput:
		if t.state == a2a.TaskStateInputRequired {
			return nil
		}
		return t.update(e, a2a.TaskStateInputRequired, "a question waits for a person's answer")
	}
	return nil
}

// end folds the turn's end.
func (t *a2aTask) end(it projection.Item) []a2a.Event {
	e := it.Event
	switch it.Status {
	case agent.StreamCompleted:
		var out []a2a.Event
		if len(t.parts) == 0 && t.text.Len() > 0 {
			// A log without content blocks (recorded before them): its text.
			out = t.artifact(a2a.TextPart{Text: t.text.String()})
		}
		return append(out, t.update(e, a2a.TaskStateCompleted, "")...)
	case agent.StreamFailed:
		state, msg := a2a.TaskStateFailed, "the turn failed"
		if e.Error != nil {
			if e.Error.Message != "" {
				msg += ": " + e.Error.Message
			}
			if refused(e.Error.Type) {
				state = a2a.TaskStateRejected
			}
		}
		return t.update(e, state, msg)
	}
	msg := "the turn was cancelled"
	if e.Error != nil && e.Error.Message != "" {
		msg += ": " + e.Error.Message
	}
	return t.update(e, a2a.TaskStateCanceled, msg)
}

// refused: a turn that failed with an error of these types was refused
// before it ran.
func refused(typ string) bool {
	return slices.ContainsFunc([]agent.Code{agent.CodeInvalid, agent.CodeAgentNotFound, agent.CodePermissionDenied},
		func(c agent.Code) bool { return typ == c.Class().Type })
}

// update sets the task's state and status message, and returns the
// status update, final when the state is.
func (t *a2aTask) update(e agent.Event, state a2a.TaskState, msg string) []a2a.Event {
	t.state = state
	t.message = nil
	if msg != "" {
		t.message = &a2a.Message{ID: fmt.Sprintf("%s#%d", t.id, e.Index), Role: a2a.MessageRoleAgent,
			TaskID: a2a.TaskID(t.id), ContextID: t.contextID, Parts: a2a.ContentParts{a2a.TextPart{Text: msg}}}
	}
	// No timestamp: the log's events carry none, and the time it is read
	// is not the time of the change.
	return []a2a.Event{&a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(t.id), ContextID: t.contextID, Final: state.Terminal(),
		Status: a2a.TaskStatus{State: state, Message: t.message}}}
}

// artifact adds a part to the answer and returns its update.
func (t *a2aTask) artifact(p a2a.Part) []a2a.Event {
	t.parts = append(t.parts, p)
	return []a2a.Event{&a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(t.id), ContextID: t.contextID, Append: len(t.parts) > 1,
		Artifact: &a2a.Artifact{ID: a2aArtifact, Name: a2aArtifact, Parts: a2a.ContentParts{p}}}}
}

// dataPart is a JSON block as a data part: an object as it is, any other
// value under "value".
func dataPart(raw json.RawMessage) a2a.Part {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		return a2a.DataPart{Data: obj}
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return a2a.DataPart{Data: map[string]any{"value": v}}
}

func toolName(e agent.Event) string { return gateway.OrEmpty(e.Tool).Name }

func toolStatus(e agent.Event) string { return cmp.Or(gateway.OrEmpty(e.Tool).Status, "ok") }
