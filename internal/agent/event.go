package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
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
