package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// EventKind says what a stream event carries.
type EventKind string

const (
	EventStatus           EventKind = "status"
	EventToken            EventKind = "token"
	EventToolStart        EventKind = "tool_start"
	EventToolEnd          EventKind = "tool_end"
	EventToolProgress     EventKind = "tool_progress"
	EventApprovalRequired EventKind = "approval_required"
	EventContent          EventKind = "content"
	EventUsage            EventKind = "usage"
	EventError            EventKind = "error"
)

// Statuses of a status event.
const (
	StreamRunning         = "RUNNING"
	StreamWaitingApproval = "WAITING_APPROVAL"
	StreamRetrying        = "RETRYING"
	StreamCompleted       = "COMPLETED"
	StreamFailed          = "FAILED"
	StreamCanceled        = "CANCELED"
)

// Event is one entry of a turn's event log. Every turn has one log, whose
// stream id is the turn's workflow id; indices start at 1, have no gaps
// and are never reused.
type Event struct {
	StreamID string    `json:"stream_id"`
	Index    int64     `json:"event_index"`
	Kind     EventKind `json:"kind"`

	// Status is set on status events.
	Status string `json:"status,omitempty"`
	// VoidFrom, on a RETRYING status, is the first index of the text the
	// failed model-call attempt streamed: token events from VoidFrom up to
	// this event are void, and the retry streams the reply again.
	VoidFrom int64 `json:"void_from,omitempty"`
	// Attempt is the model-call attempt a token or RETRYING event belongs to.
	Attempt int `json:"attempt,omitempty"`
	// Step is the turn step (CallModel's seq) a token event belongs to.
	Step int `json:"step,omitempty"`

	// Text is a token event's text.
	Text string `json:"text,omitempty"`
	// Tool describes tool_start, tool_end and approval_required events.
	Tool *ToolEvent `json:"tool,omitempty"`
	// Usage is a usage event's token counts (of one model call).
	Usage *Usage `json:"usage,omitempty"`
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
	Status string          `json:"status,omitempty"` // tool_end: ok | error | rejected | timed_out
	Output string          `json:"output,omitempty"` // tool_end: a preview of the output
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
}

// Terminal reports whether e ends its stream.
func (e Event) Terminal() bool {
	return e.Child == nil && e.Kind == EventStatus && (e.Status == StreamCompleted || e.Status == StreamFailed || e.Status == StreamCanceled)
}

// TokenBatch is what a streaming model call sends to its turn (signal
// SignalTokens) and to the turn's notify workflow: consecutive token events
// of one attempt. First is the index of Events[0]; the events' indices
// follow without gaps.
type TokenBatch struct {
	StreamID string  `json:"stream_id"`
	Step     int     `json:"step"`
	Attempt  int     `json:"attempt"`
	First    int64   `json:"first"`
	Events   []Event `json:"events"`
}

// Text is the batch's text.
func (b TokenBatch) Text() string {
	var s strings.Builder
	for _, e := range b.Events {
		s.WriteString(e.Text)
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
// text. Events of child turns (Child set) are not the stream's text.
func ReplayText(events []Event) string {
	type piece struct {
		index int64
		text  string
	}
	var pieces []piece
	for _, e := range events {
		switch {
		case e.Child != nil:
		case e.Kind == EventToken:
			pieces = append(pieces, piece{e.Index, e.Text})
		case e.Kind == EventStatus && e.Status == StreamRetrying && e.VoidFrom > 0:
			kept := pieces[:0]
			for _, p := range pieces {
				if p.index < e.VoidFrom {
					kept = append(kept, p)
				}
			}
			pieces = kept
		}
	}
	var s strings.Builder
	for _, p := range pieces {
		s.WriteString(p.text)
	}
	return s.String()
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
	case EventToken:
		return fmt.Sprintf("#%d token %q", e.Index, e.Text)
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
// running tool call is doing.
type ToolProgress struct {
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Message string `json:"message"`
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
