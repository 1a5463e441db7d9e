package gateway

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
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

// aguiQuestionValue is the value of the question custom events: answer with
// POST /v1/{streamId}/questions/{callId}.
type aguiQuestionValue struct {
	StreamID   string     `json:"streamId"`
	CallID     string     `json:"callId"`
	ToolName   string     `json:"toolName"`
	Question   string     `json:"question,omitempty"`
	Choices    []string   `json:"choices,omitempty"`
	AllowOther bool       `json:"allowOther,omitempty"`
	Role       string     `json:"role,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Answerer   string     `json:"answerer,omitempty"`
	Via        string     `json:"via,omitempty"`
}

// aguiMapper maps a turn's events, in log order, to the AG-UI events of
// one run, whose runId is the turn's job id and threadId its session (the
// job id when it has none).
//
// AG-UI has no event that takes text back, and a model call that fails
// part-way is retried and streams its reply again (a RETRYING status
// voids what the failed attempt streamed). So, as the AI SDK's mapper
// does (uiMapper), a model call's streamed events (token, reasoning,
// tool_args_delta) are held until the call has answered — its usage
// event, after which no attempt of it can run — and only those
// agent.Unvoided keeps are mapped. What else a turn logs is mapped as it
// comes (docs/events.md has the table). Events of delegated child turns
// are not this run's and are skipped.
//
// Message ids are the run id and the index of the message's first
// event, so that the same log maps to the same events every time it is
// read: a run repeated with the same runId names its messages as the
// first reading did.
type aguiMapper struct {
	threadID, runID string
	began           bool
	held            []agent.Event
	text            string // the open text message's id
	reasoning       string // the open reasoning message's id
	step            string // the open step's name
	// Calls: started (TOOL_CALL_START sent), argued (arguments sent),
	// ended (TOOL_CALL_END sent).
	started, argued, ended map[string]bool
	wroteText              bool
	stepText               strings.Builder // the text the open step's model call streamed
	answer                 string          // the answer's text block
	json                   json.RawMessage // the answer's JSON block
	failure                *agent.TurnError
}

func newAGUIMapper(threadID, runID string) *aguiMapper {
	return &aguiMapper{threadID: threadID, runID: runID, started: map[string]bool{}, argued: map[string]bool{}, ended: map[string]bool{}}
}

// add maps the next event of the turn's log. The first event of the run
// is RUN_STARTED.
func (m *aguiMapper) add(e agent.Event) []aguiEvent {
	var out []aguiEvent
	if !m.began {
		m.began = true
		out = append(out, aguiEvent{Type: aguiRunStarted, ThreadID: m.threadID, RunID: m.runID})
	}
	if e.Child != nil {
		return out
	}
	switch e.Kind {
	case agent.EventToken, agent.EventReasoning, agent.EventToolArgsDelta:
		m.held = append(m.held, e)
	case agent.EventUsage:
		out = m.release(out)
	case agent.EventStepStart:
		out = m.endStep(m.closeMessages(m.release(out)))
		m.step = "step " + strconv.Itoa(e.Step)
		m.stepText.Reset()
		out = append(out, aguiEvent{Type: aguiStepStarted, StepName: m.step})
	case agent.EventStepFinish:
		out = m.endStep(m.closeMessages(m.release(out)))
	case agent.EventToolStart, agent.EventApprovalRequired, agent.EventToolEnd, agent.EventToolProgress, agent.EventApprovalDecided,
		agent.EventQuestion, agent.EventQuestionAnswered:
		out = m.tool(e, out)
	case agent.EventCustom:
		if e.Custom != nil {
			raw := e
			out = append(m.closeMessages(m.release(out)), aguiEvent{Type: aguiCustom, Name: e.Custom.Name, Value: orNull(e.Custom.Value), RawEvent: &raw})
		}
	case agent.EventContent:
		out = m.release(out)
		var b agent.Block
		if json.Unmarshal(e.Content, &b) == nil {
			switch b.Type {
			case agent.BlockText:
				m.answer = b.Text
				if !m.wroteText && b.Text != "" {
					out = m.textDelta(out, m.id("content", e.Index), b.Text)
				}
			case agent.BlockJSON:
				m.json = b.JSON
			}
		}
	case agent.EventError:
		m.failure = e.Error
	case agent.EventStatus:
		out = m.status(e, out)
	}
	return out
}

// id is the id of a message whose first event is at index.
func (m *aguiMapper) id(kind string, index int64) string {
	return m.runID + "-" + kind + "-" + strconv.FormatInt(index, 10)
}

// release maps the held events of the model call that has answered.
func (m *aguiMapper) release(out []aguiEvent) []aguiEvent {
	for _, h := range m.held {
		switch h.Kind {
		case agent.EventToken:
			m.stepText.WriteString(h.Text)
			out = m.textDelta(out, m.id("text", h.Index), h.Text)
		case agent.EventReasoning:
			if h.Text == "" {
				continue
			}
			out = m.closeText(out)
			if m.reasoning == "" {
				m.reasoning = m.id("reasoning", h.Index)
				out = append(out, aguiEvent{Type: aguiReasoningStart, MessageID: m.reasoning},
					aguiEvent{Type: aguiReasoningMessageStart, MessageID: m.reasoning, Role: "reasoning"})
			}
			out = append(out, aguiEvent{Type: aguiReasoningMessageContent, MessageID: m.reasoning, Delta: h.Text})
		case agent.EventToolArgsDelta:
			if h.Tool == nil {
				continue
			}
			out = m.announce(m.closeMessages(out), h.Tool)
			if h.Tool.ArgsDelta != "" && !m.ended[h.Tool.CallID] {
				m.argued[h.Tool.CallID] = true
				out = append(out, aguiEvent{Type: aguiToolCallArgs, ToolCallID: h.Tool.CallID, Delta: h.Tool.ArgsDelta})
			}
		}
	}
	m.held = nil
	return out
}

// textDelta adds text to the open text message, opening one (id) if none is.
func (m *aguiMapper) textDelta(out []aguiEvent, id, text string) []aguiEvent {
	if text == "" {
		return out
	}
	out = m.closeReasoning(out)
	if m.text == "" {
		m.text = id
		out = append(out, aguiEvent{Type: aguiTextStart, MessageID: m.text, Role: "assistant"})
	}
	m.wroteText = true
	return append(out, aguiEvent{Type: aguiTextContent, MessageID: m.text, Delta: text})
}

func (m *aguiMapper) closeText(out []aguiEvent) []aguiEvent {
	if m.text != "" {
		out = append(out, aguiEvent{Type: aguiTextEnd, MessageID: m.text})
		m.text = ""
	}
	return out
}

func (m *aguiMapper) closeReasoning(out []aguiEvent) []aguiEvent {
	if m.reasoning != "" {
		out = append(out, aguiEvent{Type: aguiReasoningMessageEnd, MessageID: m.reasoning}, aguiEvent{Type: aguiReasoningEnd, MessageID: m.reasoning})
		m.reasoning = ""
	}
	return out
}

// closeMessages ends the open text and reasoning messages: something else follows.
func (m *aguiMapper) closeMessages(out []aguiEvent) []aguiEvent {
	return m.closeReasoning(m.closeText(out))
}

// endStep ends the open step.
func (m *aguiMapper) endStep(out []aguiEvent) []aguiEvent {
	if m.step != "" {
		out = append(out, aguiEvent{Type: aguiStepFinished, StepName: m.step})
		m.step = ""
	}
	return out
}

// announce starts a call, once.
func (m *aguiMapper) announce(out []aguiEvent, t *agent.ToolEvent) []aguiEvent {
	if m.started[t.CallID] {
		return out
	}
	m.started[t.CallID] = true
	return append(out, aguiEvent{Type: aguiToolCallStart, ToolCallID: t.CallID, ToolCallName: t.Name})
}

// input sends a call's complete arguments, when none were streamed, and
// ends the call, once: at its approval request, its start or its end,
// whichever comes first.
func (m *aguiMapper) input(out []aguiEvent, t *agent.ToolEvent) []aguiEvent {
	out = m.announce(out, t)
	if m.ended[t.CallID] {
		return out
	}
	if !m.argued[t.CallID] && len(t.Args) > 0 {
		m.argued[t.CallID] = true
		out = append(out, aguiEvent{Type: aguiToolCallArgs, ToolCallID: t.CallID, Delta: string(t.Args)})
	}
	m.ended[t.CallID] = true
	return append(out, aguiEvent{Type: aguiToolCallEnd, ToolCallID: t.CallID})
}

// tool maps a tool call's events.
func (m *aguiMapper) tool(e agent.Event, out []aguiEvent) []aguiEvent {
	t := e.Tool
	if t == nil {
		return out
	}
	out = m.closeMessages(m.release(out))
	switch e.Kind {
	case agent.EventToolStart:
		out = m.input(out, t)
	case agent.EventApprovalRequired:
		out = m.input(out, t)
		out = append(out, m.custom(aguiApprovalRequired, aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ApprovalID: t.ApprovalID,
			ToolName: t.Name, Args: t.Args, Reason: t.Reason, Deadline: t.Deadline}))
	case agent.EventApprovalDecided:
		v := aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ToolName: t.Name}
		if e.Approval != nil {
			v.Outcome, v.Approver, v.Reason, v.Via = e.Approval.Outcome, e.Approval.Approver, e.Approval.Reason, e.Approval.Via
			v.GrantID = e.Approval.GrantID
		}
		out = append(out, m.custom(aguiApprovalDecided, v))
	case agent.EventQuestion, agent.EventQuestionAnswered:
		q := questionOrEmpty(e.Question)
		v := aguiQuestionValue{StreamID: e.StreamID, CallID: t.CallID, ToolName: t.Name, Question: q.Text, Choices: q.Choices,
			AllowOther: q.AllowOther, Role: q.Role, Deadline: t.Deadline, Outcome: q.Outcome, Answerer: q.Answerer, Via: q.Via}
		name := aguiQuestion
		if e.Kind == agent.EventQuestionAnswered {
			name = aguiQuestionAnswered
		}
		out = append(out, m.custom(name, v))
	case agent.EventToolProgress:
		out = append(out, m.custom(aguiToolProgress, struct {
			CallID   string `json:"callId"`
			ToolName string `json:"toolName"`
			Message  string `json:"message"`
		}{t.CallID, t.Name, t.Message}))
	case agent.EventToolEnd:
		out = m.input(out, t)
		content := t.Output
		if t.Status != agent.ToolOK && strings.TrimSpace(content) == "" {
			content = "the call ended " + t.Status
		}
		out = append(out, aguiEvent{Type: aguiToolCallResult, MessageID: m.id("result", e.Index), ToolCallID: t.CallID, Content: &content, Role: "tool"})
	}
	return out
}

// custom is a CUSTOM event of the gateway's.
func (m *aguiMapper) custom(name string, v any) aguiEvent {
	data, _ := json.Marshal(v)
	return aguiEvent{Type: aguiCustom, Name: name, Value: data}
}

// status maps a status event: the end of the turn ends the run.
func (m *aguiMapper) status(e agent.Event, out []aguiEvent) []aguiEvent {
	switch e.Status {
	case agent.StreamRetrying:
		// The one rule of what a retry voids: agent.Unvoided.
		m.held = agent.Unvoided(append(m.held, e))
		m.held = m.held[:len(m.held)-1]
		return out
	case agent.StreamCompleted:
		out = m.closeCalls(m.endStep(m.closeMessages(m.release(out))))
		return append(out, aguiEvent{Type: aguiRunFinished, ThreadID: m.threadID, RunID: m.runID, Result: m.result()})
	case agent.StreamFailed, agent.StreamCanceled:
		failure := e.Error
		if failure == nil {
			failure = m.failure
		}
		msg, code := "the turn failed", agent.ErrTypeInternal
		if e.Status == agent.StreamCanceled {
			msg, code = "the turn was canceled", agent.CodeCanceled.Class().Type
		}
		if failure != nil && failure.Message != "" {
			msg = failure.Message
		}
		if failure != nil && failure.Type != "" {
			code = failure.Type
		}
		out = m.closeCalls(m.endStep(m.closeMessages(m.release(out))))
		return append(out, aguiEvent{Type: aguiRunError, Message: msg, Code: code})
	}
	return out
}

// closeCalls ends the calls still open when the run ends: a call whose
// arguments were streamed and that never started.
func (m *aguiMapper) closeCalls(out []aguiEvent) []aguiEvent {
	for _, id := range slices.Sorted(maps.Keys(m.started)) {
		if !m.ended[id] {
			m.ended[id] = true
			out = append(out, aguiEvent{Type: aguiToolCallEnd, ToolCallID: id})
		}
	}
	return out
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
