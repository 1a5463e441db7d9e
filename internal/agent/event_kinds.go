package agent

import "strings"

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

// kindList names the known kinds, for the error about an unknown one.
func kindList() string {
	kinds := EventKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
