package agui

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/words"
)

// The door speaks AG-UI 1.0: the protocol of @ag-ui/core and
// @ag-ui/client 1.0.0, whose schema is https://ag-ui.com/spec/1.0/schema.json
// (internal/e2e/testdata/agui pins those packages, and the e2e test
// validates every event the door sends with @ag-ui/core's EventSchemas).
// What 1.0 brings that the door uses:
//
//   - Reasoning is REASONING_START, REASONING_MESSAGE_START {role:
//     "reasoning"}, REASONING_MESSAGE_CONTENT, REASONING_MESSAGE_END and
//     REASONING_END, each with a messageId; 1.0 has no THINKING_* events,
//     and none are sent. REASONING_ENCRYPTED_VALUE is not sent: a
//     provider's sealed reasoning stays with the turn's transcript on
//     the server, which gives it back to the model itself.
//   - RUN_FINISHED has an outcome: success, interrupt (the run waits for
//     a person; agui_resume.go) or cancelled. A client that declares
//     protocol 1.0 (RunAgentInput.protocolVersion, which @ag-ui/client
//     1.x sends) gets it; an older one gets RUN_FINISHED as before 1.0,
//     RUN_ERROR for a cancelled turn, and a run that goes on waiting
//     where a 1.0 client's would end with an interrupt. Both get the
//     CUSTOM events of approvals and questions.
//   - RUN_FINISHED and RUN_ERROR carry the run's usage: one TokenUsage
//     per provider and model, summed from the usage of the model calls
//     the run shows (a run that resumes an interrupted one counts only
//     the calls after the interruption, as 1.0 says).
//   - RUN_STARTED says the protocol version the door speaks.
const aguiProtocolVersion = "1.0"

// AG-UI event types (@ag-ui/core) the gateway sends.
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
	Content         *string         `json:"content,omitempty"`
	Name            string          `json:"name,omitempty"`
	Value           json.RawMessage `json:"value,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	Outcome         *aguiOutcome    `json:"outcome,omitempty"`
	Usage           []aguiUsage     `json:"usage,omitempty"`
	// RawEvent, on a CUSTOM event a tool emitted, is the turn's event as
	// it is logged (with the value's id, which AG-UI's CUSTOM lacks).
	RawEvent *agent.Event `json:"rawEvent,omitempty"`
}

// aguiOutcome is why a run finished: "success", "cancelled", or
// "interrupt" with what it waits for.
type aguiOutcome struct {
	Type       string          `json:"type"`
	Interrupts []aguiInterrupt `json:"interrupts,omitempty"`
}

// aguiInterrupt is AG-UI's Interrupt: something the run needs from a
// person before it can go on.
type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       aguiMetadata    `json:"metadata"`
}

// aguiMetadata is an interrupt's metadata: the gateway's own, under its
// name, as AG-UI asks of frameworks.
type aguiMetadata struct {
	Agentflow any `json:"agentflow"`
}

// aguiUsage is AG-UI's TokenUsage: one provider and model's tokens, in
// AG-UI's accounting, which is the log's (input and output are totals;
// reasoning and cached input are parts of them).
type aguiUsage struct {
	Provider          string `json:"provider,omitempty"`
	Model             string `json:"model,omitempty"`
	InputTokens       int    `json:"inputTokens"`
	OutputTokens      int    `json:"outputTokens"`
	TotalTokens       int    `json:"totalTokens"`
	ReasoningTokens   int    `json:"reasoningTokens,omitempty"`
	CachedInputTokens int    `json:"cachedInputTokens,omitempty"`
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
// the AG-UI events of one run, whose runId is the turn's job id (or, for
// a run that resumes the turn's interrupts, the client's) and threadId
// its session (the job id when it has none).
//
// AG-UI has no event that takes text back, so a model call's text is
// given once the call has answered (projection.Held): a client never
// shows text a retry replaces, nor the same text twice. What else a turn
// logs is rendered as it comes (docs/events.md has the table).
//
// Message ids are the turn's job id and the projection's part ids (the
// index of the message's first event), so that the same log maps to the
// same events every time it is read: a run repeated with the same runId,
// or one that resumes the turn, names its messages as the first reading
// did, and the runs of one turn never name two messages alike.
type aguiMapper struct {
	threadID, runID, jobID string
	p                      *projection.Projection
	// aware: the client speaks AG-UI 1.0's interrupt-aware lifecycle
	// (aguiInput.interruptAware): a wait for a person ends the run, and a
	// cancelled turn finishes it with the cancelled outcome.
	aware bool
	began bool
	// quiet, on a run that resumes interrupts, holds their calls: the log
	// is mapped from its start all the same, so that the parts' state and
	// ids are the first reading's, but nothing is sent until the turn has
	// asked for every one of them and waits: where the interrupted run
	// stopped.
	quiet map[string]bool
	asked map[string]bool // the calls the log has asked a person about
	// open is what the turn waits for that the log has not seen resolved,
	// in the order asked.
	open     []aguiOpen
	usage    []aguiUsage     // the run's token usage, per provider and model
	step     string          // the open step's name
	stepText strings.Builder // the text the open step's model call streamed
	answer   string          // the answer's text block
	json     json.RawMessage // the answer's JSON block
}

// aguiOpen is an interrupt of the turn: a call that waits for a person.
type aguiOpen struct {
	id        aguiInterruptID
	interrupt aguiInterrupt
}

func newAGUIMapper(threadID, runID, jobID string, aware bool) *aguiMapper {
	return &aguiMapper{threadID: threadID, runID: runID, jobID: jobID, aware: aware, p: projection.New(projection.Held), asked: map[string]bool{}}
}

// resume makes the run one that goes on from the interrupts of calls.
func (m *aguiMapper) resume(calls []string) {
	m.quiet = map[string]bool{}
	for _, c := range calls {
		m.quiet[c] = true
	}
}

// add maps the next event of the turn's log. The first event of the run
// is RUN_STARTED.
func (m *aguiMapper) add(e agent.Event) []aguiEvent {
	var out []aguiEvent
	for _, it := range m.p.Add(e) {
		out = m.render(out, it)
	}
	if m.quiet != nil {
		if !m.resumedAt(e) {
			return nil
		}
		out = m.goOn(out, e)
	}
	if !m.began {
		m.began = true
		out = append([]aguiEvent{{Type: aguiRunStarted, ThreadID: m.threadID, RunID: m.runID, ProtocolVersion: aguiProtocolVersion}}, out...)
	}
	return out
}

// resumedAt reports whether a resumed run goes on after e: the turn has
// asked for every call the run answers, and waits. (A log that ends
// first ends the run.)
func (m *aguiMapper) resumedAt(e agent.Event) bool {
	if e.Terminal() {
		return true
	}
	if !waiting(e) {
		return false
	}
	for c := range m.quiet {
		if !m.asked[c] {
			return false
		}
	}
	return true
}

// goOn starts the resumed run at e: the calls it answers wait no more,
// and the step the interrupted run closed goes on. What e itself maps to
// is kept only when it ends the turn.
func (m *aguiMapper) goOn(out []aguiEvent, e agent.Event) []aguiEvent {
	m.open = slices.DeleteFunc(m.open, func(o aguiOpen) bool { return m.quiet[o.id.CallID] })
	m.quiet = nil
	var head []aguiEvent
	if m.step != "" {
		head = append(head, aguiEvent{Type: aguiStepStarted, StepName: m.step})
	}
	if !e.Terminal() {
		return head
	}
	return append(head, out...)
}

// waiting reports whether e is the turn's status of a wait for a person.
func waiting(e agent.Event) bool {
	return e.Child == nil && e.Kind == agent.EventStatus && (e.Status == agent.StreamWaitingApproval || e.Status == agent.StreamWaitingInput)
}

// waitsAt reports whether the run may end at e with the interrupts the
// turn waits on: the client speaks interrupts, the turn's status says it
// waits, and the log has asked for something it has not seen answered.
// Whether the turn still waits on those (a log read after the answers
// has them further on) is the turn's to say (pending).
func (m *aguiMapper) waitsAt(e agent.Event) bool {
	return m.aware && m.quiet == nil && len(m.open) > 0 && waiting(e)
}

// opens reports whether an interrupt of kind is open.
func (m *aguiMapper) opens(kind string) bool {
	return slices.ContainsFunc(m.open, func(o aguiOpen) bool { return o.id.Kind == kind })
}

// interrupt ends the run with the interrupts that still wait (pending
// says which): what is open closes, and RUN_FINISHED carries the
// interrupts and the run's usage. None when nothing waits any more.
func (m *aguiMapper) interrupt(pending func(aguiInterruptID) bool) []aguiEvent {
	var interrupts []aguiInterrupt
	for _, o := range m.open {
		if pending(o.id) {
			interrupts = append(interrupts, o.interrupt)
		}
	}
	if len(interrupts) == 0 {
		return nil
	}
	out := m.endStep(m.renderAll(nil, m.p.Flush()))
	return append(out, aguiEvent{Type: aguiRunFinished, ThreadID: m.threadID, RunID: m.runID,
		Outcome: &aguiOutcome{Type: "interrupt", Interrupts: interrupts}, Usage: m.usage})
}

func (m *aguiMapper) renderAll(out []aguiEvent, items []projection.Item) []aguiEvent {
	for _, it := range items {
		out = m.render(out, it)
	}
	return out
}

// id is the id of a message: the turn's job id, and the part's or the
// index of the event it comes from.
func (m *aguiMapper) id(part string) string { return m.jobID + "-" + part }

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
			// A reasoning span of one message: both take the part's id.
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
		m.track(it)
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
		return append(out, aguiEvent{Type: aguiCustom, Name: e.Custom.Name, Value: projection.OrNull(e.Custom.Value), RawEvent: new(e)})
	case projection.Answer:
		if b, ok := projection.Block(e); ok {
			switch b.Type {
			case agent.BlockText:
				m.answer = b.Text
			case agent.BlockJSON:
				m.json = b.JSON
			}
		}
	case projection.Usage:
		if m.quiet == nil {
			m.count(it.Usage, e.Model)
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

// track keeps the interrupts the turn waits on: a call asked about
// opens one, its decision or answer closes it.
func (m *aguiMapper) track(it projection.Item) {
	call := it.Tool.CallID
	m.open = slices.DeleteFunc(m.open, func(o aguiOpen) bool { return o.id.CallID == call })
	if it.Kind == projection.InputResolved {
		return
	}
	m.asked[call] = true
	m.open = append(m.open, m.interruptOf(it))
}

// input is the CUSTOM event of an approval asked or decided, or of a
// question asked or answered.
func (m *aguiMapper) input(it projection.Item) aguiEvent {
	e := it.Event
	switch {
	case it.Question != nil && it.Kind == projection.InputRequired:
		return m.custom(aguiQuestion, projection.QuestionOf(e))
	case it.Question != nil:
		return m.custom(aguiQuestionAnswered, projection.QuestionOf(e))
	case it.Kind == projection.InputRequired:
		return m.custom(aguiApprovalRequired, m.approval(it))
	}
	return m.custom(aguiApprovalDecided, m.approval(it))
}

// approval is an approval's value: as requested, or as decided.
func (m *aguiMapper) approval(it projection.Item) aguiApproval {
	e, t := it.Event, it.Tool
	if it.Kind == projection.InputRequired {
		return aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ApprovalID: t.ApprovalID,
			ToolName: t.Name, Args: t.Args, Reason: t.Reason, Deadline: t.Deadline}
	}
	v := aguiApproval{StreamID: e.StreamID, CallID: t.CallID, ToolName: t.Name}
	if e.Approval != nil {
		v.Outcome, v.Approver, v.Reason, v.Via = e.Approval.Outcome, e.Approval.Approver, e.Approval.Reason, e.Approval.Via
		v.GrantID = e.Approval.GrantID
	}
	return v
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

// end is the run's end: RUN_FINISHED with the answer (to a client of
// 1.0, with the success outcome; a cancelled turn's with the cancelled
// outcome and no result), or RUN_ERROR; either with the run's usage.
func (m *aguiMapper) end(it projection.Item) aguiEvent {
	switch {
	case it.Status == agent.StreamCompleted:
		e := aguiEvent{Type: aguiRunFinished, ThreadID: m.threadID, RunID: m.runID, Result: m.result(), Usage: m.usage}
		if m.aware {
			e.Outcome = &aguiOutcome{Type: "success"}
		}
		return e
	case it.Status == agent.StreamCanceled && m.aware:
		return aguiEvent{Type: aguiRunFinished, ThreadID: m.threadID, RunID: m.runID, Outcome: &aguiOutcome{Type: "cancelled"}, Usage: m.usage}
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
	return aguiEvent{Type: aguiRunError, Message: msg, Code: code, Usage: m.usage}
}

// count adds a model call's usage to the run's, under the call's
// provider and model ("provider:model").
func (m *aguiMapper) count(u agent.Usage, model string) {
	provider, name, ok := strings.Cut(model, ":")
	if !ok {
		provider, name = "", model
	}
	i := slices.IndexFunc(m.usage, func(x aguiUsage) bool { return x.Provider == provider && x.Model == name })
	if i < 0 {
		m.usage = append(m.usage, aguiUsage{Provider: provider, Model: name})
		i = len(m.usage) - 1
	}
	x := &m.usage[i]
	x.InputTokens += u.PromptTokens
	x.OutputTokens += u.CompletionTokens
	x.TotalTokens += u.TotalTokens
	x.ReasoningTokens += u.ReasoningTokens
	x.CachedInputTokens += u.CachedTokens
}

// interruptOf is the interrupt of a call the turn asks a person about:
// its id names the call (agui_resume.go), its message and responseSchema
// say what to answer, and its metadata carries, under "agentflow", what
// the CUSTOM event of the request carries (streamId, callId, approvalId,
// the question, …), so that a client can also answer over the API.
func (m *aguiMapper) interruptOf(it projection.Item) aguiOpen {
	e, t := it.Event, it.Tool
	var o aguiOpen
	in := &o.interrupt
	in.ToolCallID = t.CallID
	if t.Deadline != nil {
		in.ExpiresAt = t.Deadline.UTC().Format(time.RFC3339)
	}
	if it.Question != nil {
		o.id = aguiInterruptID{JobID: m.jobID, Kind: aguiKindQuestion, CallID: t.CallID}
		q := projection.QuestionOf(e)
		in.Reason, in.Message = "input_required", q.Question
		in.ResponseSchema = aguiAnswerSchema(q)
		in.Metadata = aguiMetadata{Agentflow: q}
	} else {
		o.id = aguiInterruptID{JobID: m.jobID, Kind: aguiKindApproval, ApprovalID: t.ApprovalID, CallID: t.CallID}
		in.Reason = "tool_call"
		in.Message = "Approve " + t.Name + "(" + words.Clip(string(t.Args), 200) + ")?"
		if t.Reason != "" {
			in.Message += " " + t.Reason
		}
		in.ResponseSchema = aguiApprovalSchema
		in.Metadata = aguiMetadata{Agentflow: m.approval(it)}
	}
	in.ID = o.id.String()
	return o
}

// aguiApprovalSchema is the responseSchema of an approval's interrupt:
// the payload a resume answers it with.
var aguiApprovalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean","description":"true runs the call, false rejects it"},` +
	`"reason":{"type":"string","description":"why; the model reads it when the call is rejected"}},"required":["approved"],"additionalProperties":false}`)

// aguiAnswerSchema is the responseSchema of a question's interrupt: an
// answer, one of the choices unless the question allows others.
func aguiAnswerSchema(q projection.QuestionValue) json.RawMessage {
	answer := map[string]any{"type": "string"}
	if len(q.Choices) > 0 && !q.AllowOther {
		answer["enum"] = q.Choices
	}
	data, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"answer": answer},
		"required": []string{"answer"}, "additionalProperties": false})
	return data
}

// result is RUN_FINISHED's result: the answer's JSON when the agent has
// an output schema, else its text.
func (m *aguiMapper) result() json.RawMessage {
	if len(m.json) > 0 {
		return m.json
	}
	text := cmp.Or(m.answer, m.stepText.String())
	data, _ := json.Marshal(text)
	return data
}
