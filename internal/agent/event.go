package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EventKind says what a stream event carries. Each kind has one shape,
// documented on its constant and in docs/events.md: which fields of Event
// it sets. Event.Validate checks it.
type EventKind string

const (
	// EventStatus: {status, void_from?, attempt?, step?, error?}. The
	// turn's state; COMPLETED, FAILED and CANCELED end the stream.
	EventStatus EventKind = "status"
	// EventToken: {text, step, attempt}. Answer text as the model streams
	// it; a RETRYING status voids those of a failed attempt.
	EventToken EventKind = "token"
	// EventToolStart: {tool: {call_id, name, args, source?, from_toolkit?}}.
	// The turn starts a tool call (with its complete arguments).
	EventToolStart EventKind = "tool_start"
	// EventToolEnd: {tool: {call_id, name, status, output?, data?}}.
	EventToolEnd EventKind = "tool_end"
	// EventToolProgress: {tool: {call_id, name, message}}. A running call
	// says what it is doing.
	EventToolProgress EventKind = "tool_progress"
	// EventApprovalRequired: {tool: {call_id, name, args, reason, deadline}}.
	EventApprovalRequired EventKind = "approval_required"
	// EventContent: {content}. A content block of the answer, e.g.
	// {"type":"text","text":"…"} with the final answer.
	EventContent EventKind = "content"
	// EventUsage: {step, usage, model?}. The token counts of one model
	// call, and the model that answered it ("provider:model": a fallback
	// model when the agent's own failed).
	EventUsage EventKind = "usage"
	// EventError: {error}. The turn's failure, before its FAILED status.
	EventError EventKind = "error"

	// EventReasoning: {text, step, attempt}. The model's reasoning as it
	// streams it (reasoning_content, thinking), never part of the answer:
	// ReplayText leaves it out. Fenced like tokens: a RETRYING status voids
	// those of a failed attempt.
	EventReasoning EventKind = "reasoning"
	// EventToolArgsDelta: {step, attempt, tool: {call_id, name,
	// args_delta?}}. A fragment of a tool call's JSON arguments as the
	// model streams them; the call's fragments joined in index order are
	// its arguments. The first of a call may have no args_delta: it
	// announces the call. A call's deltas precede its approval_required or
	// tool_start, which carries the complete arguments. Fenced like tokens.
	EventToolArgsDelta EventKind = "tool_args_delta"
	// EventStepStart: {step}. A step begins: one model call and the tool
	// calls it asks for. It precedes everything the step's model call
	// streams; a retried model call stays in its step.
	EventStepStart EventKind = "step_start"
	// EventStepFinish: {step, usage, finish_reason, model?}. The step has
	// ended: its model call answered and the tool calls it asked for have
	// ended. usage is the model call's; finish_reason why it stopped
	// (stop, tool_calls, length, content_filter, or a provider's own
	// reason); model the model that answered.
	EventStepFinish EventKind = "step_finish"
	// EventApprovalDecided: {tool: {call_id, name}, approval: {outcome,
	// approver?, reason?, via}}. A call that waited for approval was
	// decided: by a person (signal or update), by its deadline (timeout)
	// or by the turn's cancellation (cancel).
	EventApprovalDecided EventKind = "approval_decided"
	// EventMessageStart: {message: {id, stream_id?, on_busy?}}. A message was
	// accepted and its answer begins; id is the message's job id and
	// stream_id the turn that answers it.
	EventMessageStart EventKind = "message_start"
	// EventMessageEnd: {message: {id, stream_id?, status, on_busy?}}. The answer to
	// the message is complete; status is its turn's result status
	// (completed, failed, rejected, canceled).
	EventMessageEnd EventKind = "message_end"
	// EventSteered: {message: {id}, text}. A message of the turn's
	// conversation was added to it while it ran (on_busy "steer"): id is
	// the message's job id, text its prompt, which the model reads before
	// its next call.
	EventSteered EventKind = "steered"
	// EventQuestion: {tool: {call_id, name, args, deadline}, question:
	// {text, choices?, allow_other?, role}}. An ask_user call asks a
	// person; the turn waits for the answer (the answer signal and update)
	// until the deadline. Followed by WAITING_INPUT while it waits.
	EventQuestion EventKind = "question"
	// EventQuestionAnswered: {tool: {call_id, name}, question: {outcome,
	// answerer?, via}}: answered, timed_out or canceled. The answer is the
	// call's result, in its tool_end.
	EventQuestionAnswered EventKind = "question_answered"
	// EventCustom: {custom: {name, id?, value}, tool?: {call_id, name}}.
	// Application data a tool emits for the client (a chart, a citation, a
	// progress figure): a name, a JSON value of at most MaxCustomValueBytes
	// and, when given, an id that later events with the same name and id
	// replace.
	EventCustom EventKind = "custom"
)

// EventKinds lists every kind, in the order of the table in docs/events.md.
func EventKinds() []EventKind {
	return []EventKind{
		EventStatus, EventToken, EventReasoning, EventToolArgsDelta, EventToolStart, EventToolProgress, EventToolEnd,
		EventApprovalRequired, EventApprovalDecided, EventQuestion, EventQuestionAnswered, EventStepStart, EventStepFinish, EventMessageStart, EventMessageEnd,
		EventSteered, EventContent, EventUsage, EventCustom, EventError,
	}
}

// Streamed reports whether a model call streams events of kind k as it
// runs, so that a RETRYING status voids those of a failed attempt: token,
// reasoning and tool_args_delta.
func (k EventKind) Streamed() bool {
	return k == EventToken || k == EventReasoning || k == EventToolArgsDelta
}

// Finish reasons of a step_finish event (and of llm.Response): OpenAI's
// vocabulary, to which providers' own are mapped; a reason no mapping
// knows is passed through.
const (
	FinishStop          = "stop"
	FinishToolCalls     = "tool_calls"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// Ways an approval was decided (ApprovalEvent.Via, ApprovalRecord.Via).
const (
	ViaSignal  = "signal"
	ViaUpdate  = "update"
	ViaTimeout = "timeout"
	ViaCancel  = "cancel"
	// ViaGrant: an approval remembered for the turn or the session
	// (Grant) decided the call; it did not wait.
	ViaGrant = "grant"
)

// Bounds of a custom event.
const (
	MaxCustomNameLength = 64
	MaxCustomValueBytes = 16 << 10
)

// Statuses of a status event.
const (
	StreamRunning         = "RUNNING"
	StreamWaitingApproval = "WAITING_APPROVAL"
	// StreamWaitingInput: an ask_user call waits for a person's answer.
	StreamWaitingInput = "WAITING_INPUT"
	StreamRetrying     = "RETRYING"
	StreamCompleted    = "COMPLETED"
	StreamFailed       = "FAILED"
	StreamCanceled     = "CANCELED"
)

// Event is one entry of a turn's event log. Every turn has one log, whose
// stream id is the turn's workflow id; indices start at 1, have no gaps
// and are never reused. Which fields an event sets depends on its kind
// (see the EventKind constants); the JSON leaves the others out.
type Event struct {
	StreamID string    `json:"stream_id"`
	Index    int64     `json:"event_index"`
	Kind     EventKind `json:"kind"`

	// Status is set on status events.
	Status string `json:"status,omitempty"`
	// VoidFrom, on a RETRYING status, is the first index of what the
	// failed model-call attempt streamed: token, reasoning and
	// tool_args_delta events from VoidFrom up to this event are void, and
	// the retry streams the reply again.
	VoidFrom int64 `json:"void_from,omitempty"`
	// Attempt is the model-call attempt a streamed or RETRYING event
	// belongs to.
	Attempt int `json:"attempt,omitempty"`
	// Step is the turn step (CallModel's seq) an event belongs to: set on
	// streamed events, usage and step events.
	Step int `json:"step,omitempty"`

	// Text is a token or reasoning event's text.
	Text string `json:"text,omitempty"`
	// Tool describes the call of tool_start, tool_end, tool_progress,
	// approval_required, approval_decided and tool_args_delta events, and
	// the call that emitted a custom event.
	Tool *ToolEvent `json:"tool,omitempty"`
	// Usage is a usage or step_finish event's token counts (of one model
	// call).
	Usage *Usage `json:"usage,omitempty"`
	// FinishReason, on step_finish, is why the step's model call stopped.
	FinishReason string `json:"finish_reason,omitempty"`
	// Model, on usage and step_finish, is the model that answered the
	// step's call ("provider:model"), which is a fallback model when the
	// agent's own failed.
	Model string `json:"model,omitempty"`
	// Approval is an approval_decided event's decision.
	Approval *ApprovalEvent `json:"approval,omitempty"`
	// Question is a question or question_answered event's question.
	Question *QuestionEvent `json:"question,omitempty"`
	// Message names the message of message_start and message_end events.
	Message *MessageEvent `json:"message,omitempty"`
	// Custom is a custom event's data.
	Custom *CustomEvent `json:"custom,omitempty"`
	// Content is a content event's block (JSON), e.g. the final answer.
	Content json.RawMessage `json:"content,omitempty"`
	// Error is an error event's (or a FAILED status's) failure.
	Error *TurnError `json:"error,omitempty"`

	// Child is set on an event of a delegated child turn that this log
	// carries (its kind and fields are the child's): which call and child
	// stream it belongs to. Such events never end this stream and their
	// text is not this turn's.
	Child *ChildEvent `json:"child,omitempty"`
}

// ToolEvent is the tool part of an event.
type ToolEvent struct {
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args,omitempty"`
	// ArgsDelta, on tool_args_delta, is the next fragment of the call's
	// JSON arguments (not JSON on its own).
	ArgsDelta string `json:"args_delta,omitempty"`
	Status    string `json:"status,omitempty"` // tool_end: ok | error | rejected | timed_out | canceled | unknown
	Output    string `json:"output,omitempty"` // tool_end: a preview of the output
	// Reason, on approval_required, says why the call needs approval.
	Reason string `json:"reason,omitempty"`
	// Message, on tool_progress, says what the call is doing.
	Message string `json:"message,omitempty"`
	// Data, on tool_end, describes the data the call produced and its ref.
	Data *DataPreview `json:"data,omitempty"`
	// Source and FromToolkit, on tool_start, say where the tool comes from.
	Source      string `json:"source,omitempty"`
	FromToolkit string `json:"from_toolkit,omitempty"`
	// Deadline, on approval_required, is when the call times out.
	Deadline *time.Time `json:"deadline,omitempty"`
	// ApprovalID, on approval_required, is the value a decision on the
	// call must carry (PendingApproval.ApprovalID).
	ApprovalID string `json:"approval_id,omitempty"`
	// Resend, on approval_required, says the call ran and its outcome is
	// unknown: the decision is whether to send it again
	// (PendingApproval.Resend); Reason says what may have happened.
	Resend bool `json:"resend,omitempty"`
}

// ApprovalEvent is the decision of an approval_decided event, as it is
// stored (ApprovalRecord).
type ApprovalEvent struct {
	// Outcome is approved, rejected, timed_out or canceled.
	Outcome string `json:"outcome"`
	// Approver is who decided; empty for timed_out and canceled.
	Approver string `json:"approver,omitempty"`
	// Reason is the approver's comment (or why the call was closed).
	Reason string `json:"reason,omitempty"`
	// Via is how the decision came: signal, update, timeout, cancel or
	// grant.
	Via string `json:"via"`
	// GrantID names the grant that decided the call (via grant), or the
	// one the approval made (its scope turn or session).
	GrantID string `json:"grant_id,omitempty"`
}

// MessageEvent names the message of message_start and message_end events:
// a user message accepted (a turn's request, or a Conversation's
// send_message) and the answer to it.
type MessageEvent struct {
	// ID is the message's job id.
	ID string `json:"id"`
	// StreamID is the turn that answers it: on a Conversation's stream,
	// the child turn to follow or approve in.
	StreamID string `json:"stream_id,omitempty"`
	// Status, on message_end, is the turn's result status: completed,
	// failed, rejected or canceled.
	Status string `json:"status,omitempty"`
	// OnBusy says what a message that came while another turn ran did
	// (SendMessage.OnBusy): on its message_start, the policy it came
	// with; on the message_end of the turn it stopped, interrupt or
	// rollback (a rolled back turn is left out of the transcript).
	OnBusy string `json:"on_busy,omitempty"`
}

// CustomEvent is a custom event's data: a value a tool emits for clients,
// which the turn carries without reading it.
type CustomEvent struct {
	// Name says what the value is: a letter, then letters, digits, '_',
	// '-' or '.', at most MaxCustomNameLength bytes. Channels name the
	// event after it (the AI SDK's data-<name>).
	Name string `json:"name"`
	// ID, when set, identifies the value: a later event with the same
	// name and id replaces it (a progress bar, a growing table).
	ID string `json:"id,omitempty"`
	// Value is any JSON value of at most MaxCustomValueBytes.
	Value json.RawMessage `json:"value"`
}

// Validate checks the name, id and value of a custom event, as a tool
// emits it.
func (c CustomEvent) Validate() error {
	if err := validateCustomName(c.Name); err != nil {
		return err
	}
	if err := validateKey("custom.id", c.ID); err != nil {
		return err
	}
	switch {
	case len(c.Value) == 0:
		return Errorf(CodeInvalid, "custom %q: value is required (any JSON value, null included)", c.Name)
	case len(c.Value) > MaxCustomValueBytes:
		return Errorf(CodeInvalid, "custom %q: value is %d bytes; the limit is %d", c.Name, len(c.Value), MaxCustomValueBytes)
	case !json.Valid(c.Value):
		return Errorf(CodeInvalid, "custom %q: value is not valid JSON", c.Name)
	}
	return nil
}

func validateCustomName(name string) error {
	if name == "" {
		return Errorf(CodeInvalid, "custom.name is required")
	}
	if len(name) > MaxCustomNameLength {
		return Errorf(CodeInvalid, "custom.name is %d bytes; the limit is %d", len(name), MaxCustomNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '_' || c == '-' || c == '.')) {
			return Errorf(CodeInvalid, "custom.name %q: want a letter, then letters, digits, '_', '-' or '.'", name)
		}
	}
	return nil
}

// Terminal reports whether e ends its stream.
func (e Event) Terminal() bool {
	return e.Child == nil && e.Kind == EventStatus && (e.Status == StreamCompleted || e.Status == StreamFailed || e.Status == StreamCanceled)
}

// TokenBatch is what a streaming model call sends to its turn (signal
// SignalTokens) and to the turn's notify workflow: consecutive events of
// one attempt that the call streamed (token, reasoning, tool_args_delta),
// after the RETRYING status that voids an earlier attempt's. First is the
// index of Events[0]; the events' indices follow without gaps.
type TokenBatch struct {
	StreamID string  `json:"stream_id"`
	Step     int     `json:"step"`
	Attempt  int     `json:"attempt"`
	First    int64   `json:"first"`
	Events   []Event `json:"events"`
}

// Text is the batch's answer text: its token events' text, without
// reasoning.
func (b TokenBatch) Text() string {
	var s strings.Builder
	for _, e := range b.Events {
		if e.Kind == EventToken {
			s.WriteString(e.Text)
		}
	}
	return s.String()
}

// EventsQuery is the argument of a turn's "events" query.
type EventsQuery struct {
	AfterIndex int64 `json:"after_index"`
	Limit      int   `json:"limit,omitempty"` // 0 = all
	// HeadOnly asks for Next and Done without events.
	HeadOnly bool `json:"head_only,omitempty"`
}

// EventsPage is the answer of a turn's "events" query.
type EventsPage struct {
	// TenantID is the tenant the turn runs as; readers check it against
	// the tenant they serve.
	TenantID string  `json:"tenant_id,omitempty"`
	Events   []Event `json:"events"`
	// Next is the index the next event will have (last index + 1).
	Next int64 `json:"next"`
	// Done is set when the log holds its terminal event.
	Done bool `json:"done"`
	// First is the index of the first event the workflow's run holds,
	// when earlier events are in earlier runs (a turn that continued as
	// new); EarlierRunID is the run before, which holds them (and names
	// its own earlier run in turn). Both are empty for a log whose run
	// holds it whole.
	First        int64  `json:"first,omitempty"`
	EarlierRunID string `json:"earlier_run_id,omitempty"`
}

// ValidateAfter checks an after_index against a log whose next index is
// next: resuming past the end is a client error.
func ValidateAfter(after, next int64) error {
	if after < 0 {
		return Errorf(CodeInvalid, "after_index %d: must not be negative", after)
	}
	if after > next-1 {
		return Errorf(CodeInvalid, "after_index %d is beyond the end of the stream (last index %d)", after, next-1)
	}
	return nil
}

// ReplayText folds a sequence of events into the text a client should
// show: token texts in order, with the text voided by RETRYING events
// removed. It is what clients do, and what tests compare with the model's
// text. Reasoning is not text, and events of child turns (Child set) are
// not the stream's text.
func ReplayText(events []Event) string {
	return replay(events, EventToken)
}

// ReplayReasoning is ReplayText for reasoning: the model's reasoning of
// the stream, without that of failed attempts.
func ReplayReasoning(events []Event) string {
	return replay(events, EventReasoning)
}

func replay(events []Event, kind EventKind) string {
	var s strings.Builder
	for _, e := range Unvoided(events) {
		if e.Kind == kind && e.Child == nil {
			s.WriteString(e.Text)
		}
	}
	return s.String()
}

// Unvoided returns events without the streamed events (token, reasoning,
// tool_args_delta) that a later RETRYING status of the same stream voids:
// those with an index from its void_from that come before it. Events of
// child turns are kept as they are; ChildEvents gives a child's own.
func Unvoided(events []Event) []Event {
	out := make([]Event, 0, len(events))
	for _, e := range events {
		if e.Child == nil && e.Kind == EventStatus && e.Status == StreamRetrying && e.VoidFrom > 0 {
			kept := out[:0]
			for _, o := range out {
				if o.Child != nil || !o.Kind.Streamed() || o.Index < e.VoidFrom {
					kept = append(kept, o)
				}
			}
			out = kept
		}
		out = append(out, e)
	}
	return out
}

// StreamTenant returns the tenant of a turn's stream id
// ("turn/<tenant>/<job_id>").
func StreamTenant(streamID string) (string, error) {
	rest, ok := strings.CutPrefix(streamID, "turn/")
	tenant, job, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || tenant == "" || job == "" {
		return "", Errorf(CodeInvalid, "stream_id %q: want turn/<tenant>/<job_id>", streamID)
	}
	return tenant, nil
}

// String is a short human-readable form, for logs and the starter.
func (e Event) String() string {
	switch e.Kind {
	case EventStatus:
		return fmt.Sprintf("#%d status %s", e.Index, e.Status)
	case EventToken, EventReasoning:
		return fmt.Sprintf("#%d %s %q", e.Index, e.Kind, e.Text)
	case EventToolArgsDelta:
		if e.Tool != nil {
			return fmt.Sprintf("#%d %s %s %q", e.Index, e.Kind, e.Tool.CallID, e.Tool.ArgsDelta)
		}
	case EventStepStart:
		return fmt.Sprintf("#%d %s %d", e.Index, e.Kind, e.Step)
	case EventStepFinish:
		return fmt.Sprintf("#%d %s %d %s", e.Index, e.Kind, e.Step, e.FinishReason)
	case EventApprovalDecided:
		if e.Tool != nil && e.Approval != nil {
			return fmt.Sprintf("#%d %s %s %s", e.Index, e.Kind, e.Tool.CallID, e.Approval.Outcome)
		}
	case EventQuestionAnswered:
		if e.Tool != nil && e.Question != nil {
			return fmt.Sprintf("#%d %s %s %s", e.Index, e.Kind, e.Tool.CallID, e.Question.Outcome)
		}
	case EventMessageStart, EventMessageEnd:
		if e.Message != nil {
			return strings.TrimSpace(fmt.Sprintf("#%d %s %s %s", e.Index, e.Kind, e.Message.ID, e.Message.Status))
		}
	case EventCustom:
		if e.Custom != nil {
			return fmt.Sprintf("#%d %s %s", e.Index, e.Kind, e.Custom.Name)
		}
	}
	return fmt.Sprintf("#%d %s", e.Index, e.Kind)
}

// TurnStatus answers a turn's "status" query: where the turn is, at a
// glance.
type TurnStatus struct {
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id,omitempty"` // once routed and loaded
	AgentVersion int    `json:"agent_version,omitempty"`
	// Status is the latest status event's: RUNNING, WAITING_APPROVAL,
	// RETRYING, COMPLETED, FAILED or CANCELED.
	Status           string `json:"status"`
	Step             int    `json:"step"` // steps stored so far
	ToolCalls        int    `json:"tool_calls"`
	TokensUsed       int    `json:"tokens_used"`
	PendingApprovals int    `json:"pending_approvals"`
	CancelRequested  bool   `json:"cancel_requested,omitempty"`
	LastEventIndex   int64  `json:"last_event_index"`
}

// ToolProgress is the payload of a turn's "tool_progress" signal: what a
// running tool call is doing (Message, logged as a tool_progress event),
// and the custom events it emitted since the last signal, in order
// (logged as custom events after it). A signal with custom events may
// have no message.
type ToolProgress struct {
	CallID  string        `json:"call_id"`
	Tool    string        `json:"tool"`
	Message string        `json:"message"`
	Custom  []CustomEvent `json:"custom,omitempty"`
}

// ListEntries splits a comma-separated setting (AGENTFLOW_SECRETS, an
// allowlist, a role map) into its entries, trimmed, without the empty ones
// a trailing or doubled comma leaves.
func ListEntries(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Listed names things in a message: "none" for none, else the first most
// of them, comma-separated, and how many more there are.
func Listed(names []string, most int) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// Clip shortens s to at most n bytes, cut at a rune boundary, marking the
// cut with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ChildEvents returns the events of the child turn of a delegation call
// that a parent's log carries, as they are in the child's own stream
// (its stream id and indices), so that ReplayText folds the child's text.
func ChildEvents(events []Event, callID string) []Event {
	var out []Event
	for _, e := range events {
		if e.Child == nil || e.Child.CallID != callID {
			continue
		}
		c := e
		c.StreamID, c.Index, c.Child = e.Child.StreamID, e.Child.Index, nil
		out = append(out, c)
	}
	return out
}

// DecodeEvent decodes an event from JSON and checks it (Validate), for
// readers of logs and payloads they do not write themselves.
func DecodeEvent(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return Event{}, Errorf(CodeInvalid, "an event must be a JSON object, not %s", withArticle(typeErr.Value))
		}
		return Event{}, Errorf(CodeInvalid, "event: %s", describeJSONError(err))
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// eventFields are the payload fields of an Event, as bits.
type eventFields uint16

const (
	fStatus eventFields = 1 << iota
	fVoidFrom
	fAttempt
	fStep
	fText
	fTool
	fUsage
	fFinish
	fApproval
	fMessage
	fCustom
	fContent
	fError
	fModel
	fQuestion
)

var fieldNames = []string{"status", "void_from", "attempt", "step", "text", "tool", "usage", "finish_reason",
	"approval", "message", "custom", "content", "error", "model", "question"}

// eventShape is what a kind may and must set.
type eventShape struct{ allowed, required eventFields }

var eventShapes = map[EventKind]eventShape{
	EventStatus:           {fStatus | fVoidFrom | fAttempt | fStep | fError, fStatus},
	EventToken:            {fText | fStep | fAttempt, 0},
	EventReasoning:        {fText | fStep | fAttempt, fText},
	EventToolArgsDelta:    {fTool | fStep | fAttempt, fTool},
	EventToolStart:        {fTool, fTool},
	EventToolEnd:          {fTool, fTool},
	EventToolProgress:     {fTool, fTool},
	EventApprovalRequired: {fTool, fTool},
	EventApprovalDecided:  {fTool | fApproval, fTool | fApproval},
	EventQuestion:         {fTool | fQuestion, fTool | fQuestion},
	EventQuestionAnswered: {fTool | fQuestion, fTool | fQuestion},
	EventStepStart:        {fStep, fStep},
	EventStepFinish:       {fStep | fUsage | fFinish | fModel, fStep | fUsage | fFinish},
	EventMessageStart:     {fMessage, fMessage},
	EventMessageEnd:       {fMessage, fMessage},
	EventSteered:          {fMessage | fText, fMessage | fText},
	EventContent:          {fContent, fContent},
	EventUsage:            {fUsage | fStep | fModel, fUsage},
	EventCustom:           {fCustom | fTool, fCustom},
	EventError:            {fError, fError},
}

func (e Event) fields() eventFields {
	var f eventFields
	for _, set := range []struct {
		on  bool
		bit eventFields
	}{
		{e.Status != "", fStatus}, {e.VoidFrom != 0, fVoidFrom}, {e.Attempt != 0, fAttempt}, {e.Step != 0, fStep},
		{e.Text != "", fText}, {e.Tool != nil, fTool}, {e.Usage != nil, fUsage}, {e.FinishReason != "", fFinish},
		{e.Approval != nil, fApproval}, {e.Message != nil, fMessage}, {e.Custom != nil, fCustom},
		{len(e.Content) > 0, fContent}, {e.Error != nil, fError}, {e.Model != "", fModel}, {e.Question != nil, fQuestion},
	} {
		if set.on {
			f |= set.bit
		}
	}
	return f
}

// Validate checks that the event has its kind's shape (see the EventKind
// constants): the fields the kind needs, no field of another kind, and
// values in range. It refuses with CodeInvalid and names the field.
func (e Event) Validate() error {
	shape, ok := eventShapes[e.Kind]
	if !ok {
		return Errorf(CodeInvalid, "event kind %q is unknown (known: %s)", e.Kind, kindList())
	}
	have := e.fields()
	for i, name := range fieldNames {
		bit := eventFields(1) << i
		switch {
		case have&bit != 0 && shape.allowed&bit == 0:
			return Errorf(CodeInvalid, "%s event: %s does not belong to it", e.Kind, name)
		case have&bit == 0 && shape.required&bit != 0:
			return Errorf(CodeInvalid, "%s event: %s is required", e.Kind, name)
		}
	}
	switch {
	case e.Index < 0:
		return Errorf(CodeInvalid, "%s event: event_index %d is negative", e.Kind, e.Index)
	case e.Step < 0 || e.Attempt < 0 || e.VoidFrom < 0:
		return Errorf(CodeInvalid, "%s event: step, attempt and void_from must not be negative", e.Kind)
	}
	if c := e.Child; c != nil && (c.CallID == "" || c.StreamID == "" || c.Index < 1) {
		return Errorf(CodeInvalid, "%s event: child needs call_id, stream_id and an event_index from 1", e.Kind)
	}
	if u := e.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 || u.CachedTokens < 0 || u.ReasoningTokens < 0) {
		return Errorf(CodeInvalid, "%s event: usage counts must not be negative", e.Kind)
	}
	return e.validatePayload()
}

// validatePayload checks the values of the kind's fields.
func (e Event) validatePayload() error {
	switch e.Kind {
	case EventStatus:
		switch e.Status {
		case StreamRunning, StreamWaitingApproval, StreamWaitingInput, StreamRetrying, StreamCompleted, StreamFailed, StreamCanceled:
		default:
			return Errorf(CodeInvalid, "status event: status %q is unknown", e.Status)
		}
		if e.VoidFrom != 0 && e.Status != StreamRetrying {
			return Errorf(CodeInvalid, "status event: void_from belongs to a RETRYING status only")
		}
		// void_from is an index of the stream that logged the status: a
		// child turn's, for a child event.
		own := e.Index
		if e.Child != nil {
			own = e.Child.Index
		}
		if e.VoidFrom != 0 && own != 0 && e.VoidFrom >= own {
			return Errorf(CodeInvalid, "status event: void_from %d must be before the event's own index %d", e.VoidFrom, own)
		}
	case EventToolArgsDelta, EventToolStart, EventToolEnd, EventToolProgress, EventApprovalRequired, EventApprovalDecided,
		EventQuestion, EventQuestionAnswered:
		if err := e.Tool.validate(e.Kind); err != nil {
			return err
		}
	case EventStepStart, EventStepFinish:
		if e.Step < 1 {
			return Errorf(CodeInvalid, "%s event: step is required", e.Kind)
		}
	}
	switch e.Kind {
	case EventToolArgsDelta:
		if len(e.Tool.Args) > 0 {
			return Errorf(CodeInvalid, "tool_args_delta event: the fragment goes in tool.args_delta, not tool.args")
		}
	case EventApprovalDecided:
		return e.Approval.validate()
	case EventQuestion, EventQuestionAnswered:
		return e.Question.validate(e.Kind)
	case EventStepFinish:
		if len(e.FinishReason) > 64 {
			return Errorf(CodeInvalid, "step_finish event: finish_reason is longer than 64 bytes")
		}
		return validateKey("finish_reason", e.FinishReason)
	case EventMessageStart, EventMessageEnd:
		return e.Message.validate(e.Kind)
	case EventSteered:
		if e.Message.StreamID != "" || e.Message.Status != "" || e.Message.OnBusy != "" {
			return Errorf(CodeInvalid, "steered event: message has an id only")
		}
		if len(e.Text) > MaxPromptBytes {
			return Errorf(CodeInvalid, "steered event: text is longer than %d bytes", MaxPromptBytes)
		}
		return e.Message.validate(e.Kind)
	case EventCustom:
		if err := e.Custom.Validate(); err != nil {
			return err
		}
		if e.Tool != nil {
			return e.Tool.validate(e.Kind)
		}
	case EventContent:
		if !json.Valid(e.Content) {
			return Errorf(CodeInvalid, "content event: content is not valid JSON")
		}
	}
	return nil
}

func (t *ToolEvent) validate(kind EventKind) error {
	if strings.TrimSpace(t.CallID) == "" || strings.TrimSpace(t.Name) == "" {
		return Errorf(CodeInvalid, "%s event: tool.call_id and tool.name are required", kind)
	}
	if len(t.CallID) > MaxKeyLength || len(t.Name) > MaxKeyLength {
		return Errorf(CodeInvalid, "%s event: tool.call_id and tool.name may be at most %d bytes", kind, MaxKeyLength)
	}
	if kind != EventToolArgsDelta && t.ArgsDelta != "" {
		return Errorf(CodeInvalid, "%s event: tool.args_delta belongs to tool_args_delta events only", kind)
	}
	return nil
}

func (a *ApprovalEvent) validate() error {
	switch a.Outcome {
	case ApprovalApproved, ApprovalRejected, ApprovalTimedOut, ApprovalCanceled:
	default:
		return Errorf(CodeInvalid, "approval_decided event: approval.outcome %q: want approved, rejected, timed_out or canceled", a.Outcome)
	}
	switch a.Via {
	case ViaSignal, ViaUpdate, ViaTimeout, ViaCancel, ViaGrant:
	default:
		return Errorf(CodeInvalid, "approval_decided event: approval.via %q: want signal, update, timeout, cancel or grant", a.Via)
	}
	switch {
	case len(a.Approver) > MaxKeyLength:
		return Errorf(CodeInvalid, "approval_decided event: approval.approver is longer than %d bytes", MaxKeyLength)
	case len(a.Reason) > 4096:
		return Errorf(CodeInvalid, "approval_decided event: approval.reason is longer than 4096 bytes")
	case len(a.GrantID) > MaxKeyLength:
		return Errorf(CodeInvalid, "approval_decided event: approval.grant_id is longer than %d bytes", MaxKeyLength)
	}
	return nil
}

func (m *MessageEvent) validate(kind EventKind) error {
	if strings.TrimSpace(m.ID) == "" {
		return Errorf(CodeInvalid, "%s event: message.id is required", kind)
	}
	if err := validateKey("message.id", m.ID); err != nil {
		return err
	}
	if err := validateKey("message.stream_id", m.StreamID); err != nil {
		return err
	}
	if err := validOnBusy(m.OnBusy); err != nil {
		return Errorf(CodeInvalid, "%s event: message.%v", kind, err)
	}
	switch {
	case kind == EventMessageStart && m.Status != "":
		return Errorf(CodeInvalid, "message_start event: message.status belongs to message_end")
	case kind == EventMessageEnd:
		switch m.Status {
		case StatusCompleted, StatusFailed, StatusRejected, StatusCanceled:
		default:
			return Errorf(CodeInvalid, "message_end event: message.status %q: want completed, failed, rejected or canceled", m.Status)
		}
	}
	return nil
}

func kindList() string {
	kinds := EventKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
