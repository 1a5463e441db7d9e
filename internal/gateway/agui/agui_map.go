package agui

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// AG-UI event types (@ag-ui/core events.ts) the gateway sends.
const (
	aguiRunStarted              = "RUN_STARTED"
	aguiRunFinished             = "RUN_FINISHED"
	aguiRunError                = "RUN_ERROR"
	aguiStepStarted             = "STEP_STARTED"
	aguiStepFinished            = "STEP_FINISHED"
	aguiTextStart               = "TEXT_MESSAGE_START"
	aguiTextContent             = "TEXT_MESSAGE_CONTENT"
	aguiTextEnd                 = "TEXT_MESSAGE_END"
	aguiToolCallStart           = "TOOL_CALL_START"
	aguiToolCallArgs            = "TOOL_CALL_ARGS"
	aguiToolCallEnd             = "TOOL_CALL_END"
	aguiToolCallResult          = "TOOL_CALL_RESULT"
	aguiReasoningStart          = "REASONING_START"
	aguiReasoningMessageStart   = "REASONING_MESSAGE_START"
	aguiReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	aguiReasoningMessageEnd     = "REASONING_MESSAGE_END"
	aguiReasoningEnd            = "REASONING_END"
	aguiCustom                  = "CUSTOM"
)

// Names of the CUSTOM events for what AG-UI has no event of its own.
const (
	aguiApprovalRequired = "agentflow.approval_required"
	aguiApprovalDecided  = "agentflow.approval_decided"
	aguiQuestion         = "agentflow.question"
	aguiQuestionAnswered = "agentflow.question_answered"
	aguiToolProgress     = "agentflow.tool_progress"
)

// aguiEvent is one AG-UI event: its type and the members that type has.
// A member the type requires is never empty when it is sent.
type aguiEvent struct {
	Type            string          `json:"type"`
	ThreadID        string          `json:"threadId,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	StepName        string          `json:"stepName,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Content         *string         `json:"content,omitempty"`
	Name            string          `json:"name,omitempty"`
	Value           json.RawMessage `json:"value,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	// RawEvent, on a CUSTOM event a tool emitted, is the turn's event as
	// it is logged (with the value's id, which AG-UI's CUSTOM lacks).
	RawEvent *agent.Event `json:"rawEvent,omitempty"`
}

// aguiApproval is the value of the approval CUSTOM events: what a
// client needs to approve the call over the Approve API
// (POST /v1/{streamId}/approvals/{callId} {"approval_id": approvalId})
// and to show it.
type aguiApproval struct {
	StreamID   string          `json:"streamId"`
	CallID     string          `json:"callId"`
	ApprovalID string          `json:"approvalId,omitempty"`
	GrantID    string          `json:"grantId,omitempty"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	Outcome    string          `json:"outcome,omitempty"`
	Approver   string          `json:"approver,omitempty"`
	Via        string          `json:"via,omitempty"`
}

// aguiMapper renders a turn's projection (internal/gateway/projection) as
// the AG-UI events of one run, whose runId is the turn's job id and
// threadId its session (the job id when it has none).
//
// AG-UI has no event that takes text back, so a model call's text is
// given once the call has answered (projection.Held): a client never
// shows text a retry replaces, nor the same text twice. What else a turn
// logs is rendered as it comes (docs/events.md has the table).
//
// Message ids are the run id and the projection's part ids (the index of
// the message's first event), so that the same log maps to the same
// events every time it is read: a run repeated with the same runId names
// its messages as the first reading did.
type aguiMapper struct {
	threadID, runID string
	p               *projection.Projection
	began           bool
	step            string          // the open step's name
	stepText        strings.Builder // the text the open step's model call streamed
	answer          string          // the answer's text block
	json            json.RawMessage // the answer's JSON block
}

func newAGUIMapper(threadID, runID string) *aguiMapper {
	return &aguiMapper{threadID: threadID, runID: runID, p: projection.New(projection.Held)}
}

// add maps the next event of the turn's log. The first event of the run
// is RUN_STARTED.
func (m *aguiMapper) add(e agent.Event) []aguiEvent {
	var out []aguiEvent
	if !m.began {
		m.began = true
		out = append(out, aguiEvent{Type: aguiRunStarted, ThreadID: m.threadID, RunID: m.runID})
	}
	for _, it := range m.p.Add(e) {
		out = m.render(out, it)
	}
	return out
}

// id is the id of a message: the run's, and the part's or the index of
// the event it comes from.
func (m *aguiMapper) id(part string) string { return m.runID + "-" + part }

func (m *aguiMapper) render(out []aguiEvent, it projection.Item) []aguiEvent {
	e, t := it.Event, it.Tool
	switch it.Kind {
	case projection.StepStart:
		out = m.endStep(out)
		m.step = "step " + strconv.Itoa(e.Step)
		m.stepText.Reset()
		return append(out, aguiEvent{Type: aguiStepStarted, StepName: m.step})
	case projection.StepEnd:
		return m.endStep(out)
	case projection.PartStart:
		if it.Part == projection.Reasoning {
			return append(out, aguiEvent{Type: aguiReasoningStart, MessageID: m.id(it.PartID)},
				aguiEvent{Type: aguiReasoningMessageStart, MessageID: m.id(it.PartID), Role: "reasoning"})
		}
		return append(out, aguiEvent{Type: aguiTextStart, MessageID: m.id(it.PartID), Role: "assistant"})
	case projection.Delta:
		if it.Part == projection.Reasoning {
			return append(out, aguiEvent{Type: aguiReasoningMessageContent, MessageID: m.id(it.PartID), Delta: it.Text})
		}
		if e.Kind == agent.EventToken {
			m.stepText.WriteString(it.Text)
		}
		return append(out, aguiEvent{Type: aguiTextContent, MessageID: m.id(it.PartID), Delta: it.Text})
	case projection.PartEnd:
		if it.Part == projection.Reasoning {
			return append(out, aguiEvent{Type: aguiReasoningMessageEnd, MessageID: m.id(it.PartID)}, aguiEvent{Type: aguiReasoningEnd, MessageID: m.id(it.PartID)})
		}
		return append(out, aguiEvent{Type: aguiTextEnd, MessageID: m.id(it.PartID)})
	case projection.ToolOpen:
		return append(out, aguiEvent{Type: aguiToolCallStart, ToolCallID: t.CallID, ToolCallName: t.Name})
	case projection.ToolArgs:
		return append(out, aguiEvent{Type: aguiToolCallArgs, ToolCallID: t.CallID, Delta: it.Text})
	case projection.ToolInput:
		// The complete arguments, when none were streamed, and the call's end.
		if !it.ArgsStreamed && len(t.Args) > 0 {
			out = append(out, aguiEvent{Type: aguiToolCallArgs, ToolCallID: t.CallID, Delta: string(t.Args)})
		}
		return append(out, aguiEvent{Type: aguiToolCallEnd, ToolCallID: t.CallID})
	case projection.InputRequired, projection.InputResolved:
		return append(out, m.input(it))
	case projection.ToolProgress:
		return append(out, m.custom(aguiToolProgress, struct {
			CallID   string `json:"callId"`
			ToolName string `json:"toolName"`
			Message  string `json:"message"`
		}{t.CallID, t.Name, t.Message}))
	case projection.ToolResult:
		content := t.Output
		if t.Status != agent.ToolOK && strings.TrimSpace(content) == "" {
			content = "the call ended " + t.Status
		}
		return append(out, aguiEvent{Type: aguiToolCallResult, MessageID: m.id("result-" + strconv.FormatInt(e.Index, 10)), ToolCallID: t.CallID, Content: &content, Role: "tool"})
	case projection.Custom:
		raw := e
		return append(out, aguiEvent{Type: aguiCustom, Name: e.Custom.Name, Value: projection.OrNull(e.Custom.Value), RawEvent: &raw})
	case projection.Answer:
		if b, ok := projection.Block(e); ok {
			switch b.Type {
			case agent.BlockText:
				m.answer = b.Text
			case agent.BlockJSON:
				m.json = b.JSON
			}
		}
	case projection.End:
		out = m.endStep(out)
		for _, id := range it.OpenCalls {
			out = append(out, aguiEvent{Type: aguiToolCallEnd, ToolCallID: id})
		}
		return append(out, m.end(it))
	}
	return out
}

// input is the CUSTOM event of an approval asked or decided, or of a
// question asked or answered.
func (m *aguiMapper) input(it projection.Item) aguiEvent {
	e, t := it.Event, it.Tool
	switch {
	case it.Question != nil && it.Kind == projection.InputRequired:
		return m.custom(aguiQuestion, projection.QuestionOf(e))
	case it.Question != nil:
		return m.custom(aguiQuestionAnswered, projection.QuestionOf(e))
	case it.Kind == projection.InputRequired:
		return m.custom(aguiApprovalRequired, aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ApprovalID: t.ApprovalID,
			ToolName: t.Name, Args: t.Args, Reason: t.Reason, Deadline: t.Deadline})
	}
	v := aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ToolName: t.Name}
	if e.Approval != nil {
		v.Outcome, v.Approver, v.Reason, v.Via = e.Approval.Outcome, e.Approval.Approver, e.Approval.Reason, e.Approval.Via
		v.GrantID = e.Approval.GrantID
	}
	return m.custom(aguiApprovalDecided, v)
}

// endStep ends the open step.
func (m *aguiMapper) endStep(out []aguiEvent) []aguiEvent {
	if m.step != "" {
		out = append(out, aguiEvent{Type: aguiStepFinished, StepName: m.step})
		m.step = ""
	}
	return out
}

// custom is a CUSTOM event of the gateway's.
func (m *aguiMapper) custom(name string, v any) aguiEvent {
	data, _ := json.Marshal(v)
	return aguiEvent{Type: aguiCustom, Name: name, Value: data}
}

// end is the run's end: RUN_FINISHED with the answer, or RUN_ERROR.
func (m *aguiMapper) end(it projection.Item) aguiEvent {
	if it.Status == agent.StreamCompleted {
		return aguiEvent{Type: aguiRunFinished, ThreadID: m.threadID, RunID: m.runID, Result: m.result()}
	}
	msg, code := "the turn failed", agent.ErrTypeInternal
	if it.Status == agent.StreamCanceled {
		msg, code = "the turn was canceled", agent.CodeCanceled.Class().Type
	}
	if it.Error != nil && it.Error.Message != "" {
		msg = it.Error.Message
	}
	if it.Error != nil && it.Error.Type != "" {
		code = it.Error.Type
	}
	return aguiEvent{Type: aguiRunError, Message: msg, Code: code}
}

// result is RUN_FINISHED's result: the answer's JSON when the agent has
// an output schema, else its text.
func (m *aguiMapper) result() json.RawMessage {
	if len(m.json) > 0 {
		return m.json
	}
	text := m.answer
	if text == "" {
		text = m.stepText.String()
	}
	data, _ := json.Marshal(text)
	return data
}
