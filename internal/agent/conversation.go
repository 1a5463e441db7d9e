package agent

import (
	"strings"
	"unicode/utf8"
)

// ConversationInput starts a session's Conversation workflow
// (conv/<tenant>/<session>).
type ConversationInput struct {
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id,omitempty"` // empty: each message is routed
	// AgentVersion pins the conversation's turns to that version of
	// AgentID (TurnRequest.AgentVersion); 0: the active one.
	AgentVersion int `json:"agent_version,omitempty"`
	// History is "load" (default: turns see the session's transcript) or
	// "fresh" (each turn starts clean).
	History string `json:"history,omitempty"`
	// MaxHistoryEvents bounds each run's history: the workflow continues as
	// new between turns while a turn's worth of room is left. 0 = 2000;
	// at least 200.
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	// OnBusy is what a message that arrives while a turn runs does, when
	// it does not say (SendMessage.OnBusy); "" is OnBusyEnqueue.
	OnBusy string `json:"on_busy,omitempty"`
	// MaxPending bounds the messages waiting for their turn; 0 is
	// DefaultMaxPending.
	MaxPending int `json:"max_pending,omitempty"`
	// MemoryIdleSec is how long the conversation waits without a message,
	// after turns of an authenticated caller, before it has them looked at
	// for long-term memories (MemoryExtract); 0 is 600 (10 minutes), at
	// most 604800 (a week).
	MemoryIdleSec int `json:"memory_idle_sec,omitempty"`

	// Carry is set by the workflow itself when it continues as new.
	Carry *ConversationCarry `json:"carry,omitempty"`
}

// Validate checks the input.
func (in ConversationInput) Validate() error {
	if err := requireKey("tenant_id", in.TenantID); err != nil {
		return err
	}
	if err := requireKey("session_id", in.SessionID); err != nil {
		return err
	}
	if err := ValidateID("agent_id", in.AgentID); err != nil {
		return err
	}
	if err := validOnBusy(in.OnBusy); err != nil {
		return err
	}
	if in.AgentVersion < 0 || in.AgentVersion > 0 && in.AgentID == "" {
		return Errorf(CodeInvalid, "agent_version %d: want a version of the agent agent_id names (0: its active one)", in.AgentVersion)
	}
	if in.MaxPending < 0 || in.MaxPending > 10_000 {
		return Errorf(CodeInvalid, "max_pending %d: want 0 (%d) to 10000", in.MaxPending, DefaultMaxPending)
	}
	if in.MemoryIdleSec < 0 || in.MemoryIdleSec > 604_800 {
		return Errorf(CodeInvalid, "memory_idle_sec %d: want 0 (600) to 604800", in.MemoryIdleSec)
	}
	switch in.History {
	case "", HistoryLoad, HistoryFresh:
	default:
		return Errorf(CodeInvalid, "history %q: want %q or %q", in.History, HistoryLoad, HistoryFresh)
	}
	if in.MaxHistoryEvents != 0 && in.MaxHistoryEvents < 200 {
		return Errorf(CodeInvalid, "max_history_events %d: want 0 (default 2000) or at least 200", in.MaxHistoryEvents)
	}
	return nil
}

func requireKey(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return Errorf(CodeInvalid, "%s is required", field)
	}
	if len(v) > MaxKeyLength {
		return Errorf(CodeInvalid, "%s is longer than %d bytes", field, MaxKeyLength)
	}
	return ValidateID(field, v)
}

// SendMessage is the argument of a Conversation's send_message update.
type SendMessage struct {
	Prompt  string      `json:"prompt"`
	JobID   string      `json:"job_id,omitempty"` // idempotency key; default: <session>-<n>
	Context TurnContext `json:"context,omitzero"`
	// Caller is who sends the message, from the credential (see
	// TurnRequest.Caller); the message's turn carries it.
	Caller *Caller `json:"caller,omitempty"`
	// OnBusy is what happens to the message when it arrives while a turn
	// of the conversation runs (OnBusyEnqueue, …); "" is the
	// conversation's own (ConversationInput.OnBusy).
	OnBusy string `json:"on_busy,omitempty"`
	// StopAt, for a message that interrupts or rolls back the running
	// turn, is where the turn stops: StopNow (the default: its model call
	// and tool calls in flight are stopped) or StopAtBoundary (they
	// finish, and the turn stops before its next step).
	StopAt string `json:"stop_at,omitempty"`
	// Channel is the door the message came through (TurnRequest.Channel),
	// which its turn carries; empty: ChannelTemporal.
	Channel string `json:"channel,omitempty"`
	// Deliver names targets of the conversation's agent the message's
	// turn pushes its result to (TurnRequest.Deliver).
	Deliver []DeliverTo `json:"deliver,omitempty"`
}

// Where a turn that a message interrupts stops (SendMessage.StopAt).
const (
	StopNow        = "now"
	StopAtBoundary = "boundary"
)

// What a message that arrives while a turn runs does (SendMessage.OnBusy).
const (
	// OnBusyEnqueue waits for the running turn, and those queued before
	// it, to end (the default).
	OnBusyEnqueue = "enqueue"
	// OnBusyReject refuses the message (CodeConflict): nothing is queued and
	// the running turn goes on.
	OnBusyReject = "reject"
	// OnBusyInterrupt stops the running turn at its next safe point —
	// keeping what its model had written as its partial answer, in the
	// transcript — and answers the message next.
	OnBusyInterrupt = "interrupt"
	// OnBusyRollback stops the running turn and leaves it out of the
	// transcript (its partial answer is not kept), then answers the
	// message next.
	OnBusyRollback = "rollback"
	// OnBusySteer adds the message to the running turn, which goes on:
	// the model reads it before its next call (one more, if it had
	// answered). A turn that ends before it could take the message in
	// leaves it to be answered next, as a message of its own.
	OnBusySteer = "steer"
)

// SteerMessage is a message added to a running turn (OnBusySteer), sent
// to it as contract.SignalSteer.
type SteerMessage struct {
	// ID is the message's job id in its conversation.
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
}

// Validate checks a steer message before a turn takes it in.
func (m SteerMessage) Validate() error {
	if err := requireKey("id", m.ID); err != nil {
		return err
	}
	return SendMessage{Prompt: m.Prompt}.Validate()
}

// DefaultMaxPending is how many messages a conversation queues when
// ConversationInput.MaxPending is not set; past it a message is refused
// (CodeRateLimited).
const DefaultMaxPending = 100

// ValidOnBusy checks an on_busy value ("" is the default).
func ValidOnBusy(v string) error { return validOnBusy(v) }

// validOnBusy checks an on_busy value.
func validOnBusy(v string) error {
	switch v {
	case "", OnBusyEnqueue, OnBusyReject, OnBusyInterrupt, OnBusyRollback, OnBusySteer:
		return nil
	}
	return Errorf(CodeInvalid, "on_busy %q: want %q, %q, %q, %q or %q", v, OnBusyEnqueue, OnBusyReject, OnBusyInterrupt, OnBusyRollback, OnBusySteer)
}

// Validate checks a message before it is accepted: it refuses what the
// message's turn (a TurnRequest) would refuse, so that an accepted
// message never becomes a rejected turn.
func (m SendMessage) Validate() error {
	if strings.TrimSpace(m.Prompt) == "" {
		return Errorf(CodeInvalid, "prompt is required and must not be blank")
	}
	if len(m.Prompt) > MaxPromptBytes {
		return Errorf(CodeInvalid, "prompt is longer than %d bytes", MaxPromptBytes)
	}
	if !utf8.ValidString(m.Prompt) {
		return Errorf(CodeInvalid, "prompt is not valid UTF-8")
	}
	if err := validateKey("job_id", m.JobID); err != nil {
		return err
	}
	if err := m.Context.validate(); err != nil {
		return err
	}
	if err := m.Caller.validate(); err != nil {
		return err
	}
	if err := validateChannel(m.Channel); err != nil {
		return err
	}
	if err := checkDeliverTo(m.Deliver); err != nil {
		return err
	}
	if err := validOnBusy(m.OnBusy); err != nil {
		return err
	}
	switch m.StopAt {
	case "", StopNow, StopAtBoundary:
	default:
		return Errorf(CodeInvalid, "stop_at %q: want %q or %q", m.StopAt, StopNow, StopAtBoundary)
	}
	return m.Context.Bounded()
}

// SendMessageResult names the turn that answers a message. The turn may
// start later than the update returns (messages are answered in order);
// until it starts, its workflow id is not found.
type SendMessageResult struct {
	TurnWorkflowID string `json:"turn_workflow_id"`
	JobID          string `json:"job_id"`
	// Steered: the message was added to the running turn
	// TurnWorkflowID (OnBusySteer), whose answer answers it too.
	Steered bool `json:"steered,omitempty"`
}

// ConversationCarry is what a Conversation hands to its next run.
type ConversationCarry struct {
	Pending []PendingMessage  `json:"pending,omitempty"`
	Window  []TranscriptEntry `json:"window,omitempty"`
	Digest  string            `json:"digest,omitempty"`
	Turns   int               `json:"turns"`
	// Accepted counts messages ever accepted: default job ids use it.
	Accepted int      `json:"accepted"`
	Recent   []string `json:"recent,omitempty"` // job ids already accepted, newest last
	// RecentHashes maps each of Recent to the hash of its turn's request
	// (TurnRequest.Hash), so that a job id reused for another message is
	// refused; a job id without one (carried by an earlier release) is not.
	RecentHashes map[string]string `json:"recent_hashes,omitempty"`
	Runs         int               `json:"runs"`
	// Stream is the conversation's event log as its Workflow Stream
	// hands it on: the last items and the offsets and indices they have.
	// Nil from runs that kept no log.
	Stream *StreamState `json:"stream,omitempty"`
}

// StreamState is what a workflow's event log hands to its next run when it
// continues as new, in the shape of Temporal's WorkflowStreamState
// (contrib/workflowstreams): the log's last items, each as a Workflow
// Streams item (topic, data: the standard base64 of a protobuf Payload;
// offset written as 0, as Temporal's packages write it: the items' offsets
// follow from BaseOffset), and the offset of the first of them. It is a
// bounded tail, not the whole log, so that the next run's input does not
// grow with the conversation. NextIndex is the index the log's next event
// will have: event indices go on across runs as offsets do.
// internal/eventlog makes and reads it (Log.Carry, Restore).
type StreamState struct {
	Log        []StreamItem `json:"log"`
	BaseOffset int64        `json:"base_offset"`
	NextIndex  int64        `json:"next_index"`
	// ReadOffset is how far the stream's Workflow Streams subscribers had
	// read it when it was handed on: the furthest offset a poll came
	// from. Absent: no one had polled. The next run keeps the items from
	// it on when it hands on in turn (eventlog.Log.Carry).
	ReadOffset *int64 `json:"read_offset,omitempty"`
}

// StreamItem is one item of a StreamState's log.
type StreamItem struct {
	Topic  string `json:"topic"`
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
}

// PendingMessage is an accepted message whose turn has not started.
type PendingMessage struct {
	SendMessage
	JobID string `json:"job_id"`
	// Busy is the on_busy policy that applied to the message: the one it
	// came with, when another turn ran as it arrived; "" when none ran.
	Busy string `json:"busy,omitempty"`
}

// TranscriptEntry is one turn as the Conversation remembers it.
type TranscriptEntry struct {
	JobID     string `json:"job_id"`
	Prompt    string `json:"prompt"`
	Output    string `json:"output,omitempty"`
	Status    string `json:"status"`
	ResultRef string `json:"result_ref,omitempty"`
}

// Transcript answers a Conversation's transcript query: the recent turns
// in full and a digest of earlier ones. The whole transcript is in the
// store (sessions).
type Transcript struct {
	TenantID  string            `json:"tenant_id"`
	SessionID string            `json:"session_id"`
	Turns     int               `json:"turns"`
	Digest    string            `json:"digest,omitempty"`
	Window    []TranscriptEntry `json:"window"`
	Pending   []PendingMessage  `json:"pending,omitempty"`
	Runs      int               `json:"runs"` // continue-as-new count
}
