package checker

import (
	"strings"
	"time"
)

// Records are what a workload gathered of one trial, each part from its
// own source. Every slice may be empty: a part left out is not checked.
type Records struct {
	// Trial names the trial in the table, e.g. "PostgreSQL failover
	// under load".
	Trial     string
	Turns     []Turn
	Writes    []Write
	Streams   []Stream
	Approvals []Approval
	Results   []Result
	Sessions  []Session
	Fault     Fault
	Probes    []Probe
	// Began and Ended are when the workload started its first turn and
	// stopped starting turns: the span its rate (Stats.Rate) is over.
	Began, Ended time.Time
}

// Turn is one turn a client started, with what Temporal holds of it at
// the check. Job is unique among a trial's turns.
type Turn struct {
	// Job is the job id the client started the turn with (the request's
	// job_id).
	Job string
	// Accepted says the gateway answered the start (Start's response, or
	// a first event of Stream). A start whose answer was lost is in doubt:
	// the turn may never have begun, so zero chains is no violation; one
	// that began must still end once.
	Accepted bool
	// Chains counts the closed workflow chains of the turn's workflow id
	// in Temporal's visibility (ListWorkflow on WorkflowId): every closed
	// run whose status is not ContinuedAsNew ends one chain, since a
	// continue-as-new run is a link of the chain its last run ends.
	Chains int
	// Running counts the runs of the workflow id visibility lists as
	// Running at the check.
	Running int
	// End is how the turn ended, from its stored result's status
	// (GetResult) or the terminal status its clients saw; empty when
	// unknown. Use ParseEnd on either.
	End End
}

// End is how a turn ended.
type End string

// The ends of a turn.
const (
	Completed End = "completed"
	Failed    End = "failed"
	Canceled  End = "canceled"
)

// ParseEnd reads an end as the product spells it in each place — a
// stream's terminal status (STATUS_COMPLETED), the proto enum's name
// (COMPLETED) or a stored result's status (completed, or rejected, a
// failure) — and returns "" for a status that ends nothing.
func ParseEnd(s string) End {
	switch strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "STATUS_")) {
	case "completed":
		return Completed
	case "failed", "rejected":
		return Failed
	case "canceled", "cancelled":
		return Canceled
	}
	return ""
}

// Write is one tool call's writes to a counting API, by the key its
// requests carry. Key is unique among a trial's writes. CountingAPI.Writes
// fills the counts, and Recorder.Writes joins in what the streams said.
type Write struct {
	// Key is the call's key as the API saw it: the request body's key,
	// or its Idempotency-Key header. The workload computes the same key
	// from a tool_end's call id, to join the stream's word on the call.
	Key string
	// Job is the turn that made the call, when known (the body's job).
	Job string
	// Idempotent says the API deduplicates the key: it applies the
	// write once however many requests carry it.
	Idempotent bool
	// Outcome is what the stream's tool_end said of the call; "" when no
	// client saw the call end.
	Outcome Outcome
	// Requests counts the requests the API received with the key.
	Requests int
	// Effects counts the times the API applied the write: at most 1 for
	// an idempotent key; for an API that deduplicates nothing, every
	// request is an effect.
	Effects int
}

// Outcome is what the stream says of a tool call that wrote.
type Outcome string

// The outcomes of a call, from its tool_end status: ok; error, rejected
// or timed_out (the call says it was not made); unknown (a crash left the
// write in doubt, and the product said so).
const (
	CallOK      Outcome = "ok"
	CallFailed  Outcome = "failed"
	CallUnknown Outcome = "unknown"
)

// ParseOutcome reads a tool_end's status as an Outcome ("" for one that
// says nothing of a write).
func ParseOutcome(status string) Outcome {
	switch strings.ToLower(status) {
	case "ok":
		return CallOK
	case "error", "rejected", "timed_out", "failed":
		return CallFailed
	case "unknown":
		return CallUnknown
	}
	return ""
}

// applied is how many times the far side applied the write.
func (w Write) applied() int {
	if w.Idempotent {
		return w.Effects
	}
	return max(w.Requests, w.Effects)
}

// Stream is what one client received while it followed one turn, across
// its reconnects. StreamRecorder fills it as events arrive.
type Stream struct {
	// Client names the client, unique in the trial (e.g. "c3/job-17").
	Client string
	// Job is the turn it followed.
	Job string
	// From is the index the client first asked to start after (Resume's
	// after_index; 0 from the beginning): indexes up to it are not owed.
	From int64
	// Indexes are the event_index of each event received, in the order
	// received, every connection's in turn.
	Indexes []int64
	// Resumes counts the times the client reconnected and resumed after
	// the last index it had.
	Resumes int
	// End is the terminal status it received (COMPLETED, FAILED or
	// CANCELED); "" when its stream ended without one.
	End End
	// Answer is the answer text it assembled (tokens less those a
	// STATUS_RETRYING voided, or the final content block), compared with
	// the stored result's when End is Completed.
	Answer string
}

// Approval is one tool call that waited for a person's decision, and the
// one decision the workload made.
type Approval struct {
	// ID is the call's approval_id (the approval_required event's).
	ID string
	// Job is the turn the call belongs to.
	Job string
	// Approve is the decision: true approves, false denies.
	Approve bool
	// Sent counts the Approve requests the workload sent for it (one
	// more for each retry after a lost answer).
	Sent int
	// Accepted counts the Approve requests the gateway answered with an
	// outcome; a repeat of a decided call is refused, so more than one
	// means the call was decided twice.
	Accepted int
	// Key is the key of the call's write at a counting API, when it writes
	// to one: whether the API applied it says whether the tool ran.
	Key string
	// ToolEnd is the call's tool_end status the stream showed (ok, error,
	// unknown: it ran; rejected, timed_out: it did not); "" when no
	// client saw it. Used when Key is empty.
	ToolEnd string
}

// Result is what the database stores of one job's result.
type Result struct {
	// Job is the job id.
	Job string
	// Rows counts the job's stored result rows (agent_results).
	Rows int
	// Answer is the stored answer text (GetResult's output).
	Answer string
}

// Session is one conversation the workload sent messages to, and its
// transcript after the trial.
type Session struct {
	// ID is the session id.
	ID string
	// Sent are the messages the workload sent, in the order it sent them
	// (one after another: each after the previous one's answer from the
	// gateway, with on_busy enqueue, so each has an answer of its own).
	Sent []Message
	// Transcript is the session's messages after the trial, oldest first
	// (session_messages by seq). Only user and assistant entries count;
	// an assistant entry with empty text (a tool call) is skipped.
	Transcript []Entry
}

// Message is one message the workload sent to a session.
type Message struct {
	// Job is the job id it was sent with (SendMessage's job_id); with
	// the transcript's job ids it names the message's entries. Leave it
	// empty, on both sides, to match entries by their text.
	Job string
	// Prompt is the message's text.
	Prompt string
	// Accepted says the gateway answered SendMessage; a message whose
	// answer was lost may be in the transcript at most once.
	Accepted bool
}

// Entry is one message of a transcript.
type Entry struct {
	// Job is the job that appended it (session_messages.job_id).
	Job string
	// Role is user or assistant (others are skipped).
	Role string
	// Text is the message's content.
	Text string
}

// Fault is when the trial's fault was injected and healed.
type Fault struct {
	// Injected is when it was injected; zero for a trial without a fault.
	Injected time.Time
	// Healed is when it was healed; zero for a fault without a heal (a
	// failover, a kill): recovery then counts from Injected.
	Healed time.Time
}

// Probe is one small turn the workload runs every ~250 ms to learn when
// the product answers again.
type Probe struct {
	// At is when the probe turn ended.
	At time.Time
	// OK says it completed with its expected answer.
	OK bool
}
