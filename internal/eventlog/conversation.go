package eventlog

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/words"
)

// A Conversation's log is a Log too, whose stream id is the
// conversation's workflow id (conv/<tenant>/<session>). For each message
// it holds a message_start (StartMessage), the events of the turn that
// answers it as child events (AcceptMessage), the answer's text on the
// text topic and a message_end with the turn's status (EndMessage). It
// lives across the conversation's runs: each run hands the next one the
// log's last items (Carry, Restore), and offsets and indices go on.

// message is the message whose turn the log takes events from.
type message struct {
	id, streamID string
	// last is the turn's index of the last event taken from it.
	last int64
}

// StartMessage logs that a message's turn starts: a message_start with
// the message's id (its job id), the turn's stream and, for a message
// that came while another turn ran, the on_busy policy it came with
// (agent.MessageEvent.OnBusy). From now on the log takes the turn's
// batches (AcceptMessage) until EndMessage.
func (l *Log) StartMessage(id, streamID, onBusy string) agent.Event {
	l.msg = &message{id: id, streamID: streamID}
	return l.Append(agent.Event{Kind: agent.EventMessageStart, Message: &agent.MessageEvent{ID: id, StreamID: streamID, OnBusy: onBusy}})
}

// AcceptMessage logs a batch of the running message's turn — its model
// calls' token batches (the conversation is its notify workflow) or its
// own tool and approval events (Forwarder) — as child events whose
// call_id is the message's id, as a delegating turn logs its children's.
// A batch of another stream, with no events, with indices that do not
// follow one another, or that does not start after the last event taken
// (a repeat, or a late batch of a failed attempt that lost the race) is
// refused whole.
func (l *Log) AcceptMessage(b agent.TokenBatch) bool {
	m := l.msg
	if m == nil || b.StreamID != m.streamID || len(b.Events) == 0 || b.First <= m.last {
		l.dropped++
		return false
	}
	for i, e := range b.Events {
		if e.Index != b.First+int64(i) {
			l.dropped++
			return false
		}
	}
	m.last = b.Events[len(b.Events)-1].Index
	l.AppendChild(b, m.id)
	return true
}

// EndMessage logs the end of the running message's turn: the answer's
// text on the text topic (a completed turn's output: final, its turn has
// ended) and a message_end with the turn's status (completed, failed,
// rejected or canceled; anything else is logged as failed) and, when a
// later message's policy stopped the turn, that policy (interrupt or
// rollback). The log takes nothing more from the turn.
func (l *Log) EndMessage(status, output, onBusy string) agent.Event {
	m := l.msg
	if m == nil {
		m = &message{}
	}
	l.msg = nil
	switch status {
	case agent.StatusCompleted:
		l.AppendText(output)
	case agent.StatusFailed, agent.StatusRejected, agent.StatusCanceled:
	default:
		status = agent.StatusFailed
	}
	return l.Append(agent.Event{Kind: agent.EventMessageEnd, Message: &agent.MessageEvent{ID: m.id, StreamID: m.streamID, Status: status, OnBusy: onBusy}})
}

// CarryBytes bounds the items a Conversation's run hands to the next one
// (Carry), measured as polls measure them: base64 data plus topic. About
// a few answers' worth of events: a subscriber a little behind when the
// conversation continues as new resumes without a gap, one further
// behind gets TruncatedOffset and starts again from what was kept.
const CarryBytes = 64 << 10

// DetachPollers ends the run's stream before the workflow continues as
// new, as Temporal's package does: new polls are refused (StreamDraining)
// and the polls waiting are answered with what the log holds (often
// nothing), so that once every handler has finished the run can continue
// as new with no poll left unanswered. Subscribers poll again, reach the
// next run, and go on from the same offsets.
func (l *Log) DetachPollers() { l.draining = true }

// ReadCarryBytes bounds what Carry keeps for subscribers reading along:
// the items from where they had read, when more than the tail, up to
// this many bytes as polls measure them. A quarter of Temporal's
// default 2 MB payload limit, which the next run's input must stay
// under with the rest of what is carried.
const ReadCarryBytes = 512 << 10

// Carry is what the log hands to the workflow's next run: its last items,
// at most maxBytes of them as polls measure them, with the offset of the
// first and the next event index. When a subscriber has polled and the
// items from where it had read (ReadTo) are more than that tail but at
// most ReadCarryBytes, Carry keeps them all, so that a subscriber reading
// along never misses an item however quickly runs follow one another (a
// run of local calls can make all its steps in one workflow task, before
// any poll reaches it). Offsets before the first item kept are gone: a
// poll from one of them fails with TruncatedOffset.
func (l *Log) Carry(maxBytes int) (agent.StreamState, error) {
	var items []agent.StreamItem // newest first
	size, kept := 0, 0
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := l.entries[i]
		data, err := l.encode(e)
		if err != nil {
			return agent.StreamState{}, err
		}
		unread := l.read >= 0 && l.base+int64(i) >= l.read
		if size += len(data) + len(e.topic()); size > maxBytes && (!unread || size > ReadCarryBytes) {
			break
		}
		items = append(items, agent.StreamItem{Topic: e.topic(), Data: data})
		if size <= maxBytes {
			kept = len(items)
		}
	}
	if l.read >= 0 && l.Offset()-int64(len(items)) > l.read {
		// The unread items are more than ReadCarryBytes: the tail only.
		items = items[:kept]
	}
	slices.Reverse(items)
	if items == nil {
		items = []agent.StreamItem{}
	}
	s := agent.StreamState{Log: items, BaseOffset: l.Offset() - int64(len(items)), NextIndex: l.Next()}
	if l.read >= 0 {
		read := l.read
		s.ReadOffset = &read
	}
	return s, nil
}

// Restore makes the log of the stream streamID from what its previous run
// handed on (Carry). The state is the workflow's input, which whoever
// starts the workflow writes: a state that is not what Carry makes —
// offsets or indices out of range, an item that does not decode, an event
// of another stream or out of order — is refused (agent.CodeInvalid),
// saying what. An event's other fields are taken as they are: the log
// made them, and a check that a later release tightens must not cost a
// conversation its next run.
func Restore(streamID string, s agent.StreamState) (*Log, error) {
	l := New(streamID)
	if s.BaseOffset < 0 || s.BaseOffset > maxCarried {
		return nil, agent.Errorf(agent.CodeInvalid, "stream.base_offset %d: want 0 to 2^53", s.BaseOffset)
	}
	l.base = s.BaseOffset
	if r := s.ReadOffset; r != nil {
		if *r < 0 || *r > maxCarried {
			return nil, agent.Errorf(agent.CodeInvalid, "stream.read_offset %d: want 0 to 2^53", *r)
		}
		// Within what the run holds: where a subscriber had read before
		// what was handed on is where the next run's items start.
		l.read = min(max(*r, l.base), l.base+int64(len(s.Log)))
	}
	var events []agent.Event
	for i, it := range s.Log {
		v, err := decodeCarried(it) //workflowcheck:ignore (decoding is deterministic)
		if err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "stream.log[%d]: %s", i, err)
		}
		switch v := v.(type) {
		case string:
			l.entries = append(l.entries, entry{text: v})
		case agent.Event:
			if v.StreamID != streamID {
				return nil, agent.Errorf(agent.CodeInvalid, "stream.log[%d]: an event of stream %q, not of %q", i, words.Clip(v.StreamID, 100), streamID)
			}
			if n := len(events); n > 0 && v.Index != events[n-1].Index+1 {
				return nil, agent.Errorf(agent.CodeInvalid, "stream.log[%d]: event_index %d does not follow %d", i, v.Index, events[n-1].Index)
			}
			events = append(events, v)
			l.entries = append(l.entries, entry{index: v.Index})
		}
	}
	switch n := len(events); {
	case s.NextIndex < 1 || s.NextIndex > maxCarried:
		return nil, agent.Errorf(agent.CodeInvalid, "stream.next_index %d: want 1 to 2^53", s.NextIndex)
	case n > 0 && events[n-1].Index != s.NextIndex-1:
		return nil, agent.Errorf(agent.CodeInvalid, "stream.next_index %d does not follow the last event's index %d", s.NextIndex, events[n-1].Index)
	case s.NextIndex-1 < int64(n):
		return nil, agent.Errorf(agent.CodeInvalid, "stream.next_index %d: the log holds %d events", s.NextIndex, n)
	}
	l.events = events
	l.skipped = s.NextIndex - 1 - int64(len(events))
	l.handed = len(events)
	return l, nil
}

// maxCarried bounds the offsets and indices a carried state may give:
// 2^53, the largest integer every client's JSON numbers hold exactly
// (TypeScript's are doubles), and far from overflowing as the log grows.
const maxCarried = 1 << 53

// decodeCarried decodes a carried item: an event (agent.Event, checked)
// on the events topic, a JSON string on the text topic.
func decodeCarried(it agent.StreamItem) (any, error) {
	b, err := base64.StdEncoding.DecodeString(it.Data)
	if err != nil {
		return nil, fmt.Errorf("data is not standard base64")
	}
	var p commonpb.Payload
	// Decoding protobuf and JSON is deterministic; workflowcheck cannot
	// tell.
	if err := proto.Unmarshal(b, &p); err != nil { //workflowcheck:ignore
		return nil, fmt.Errorf("data is not a protobuf Payload")
	}
	if enc := string(p.GetMetadata()["encoding"]); enc != "json/plain" {
		return nil, fmt.Errorf("payload encoding %q: want json/plain", words.Clip(enc, 40))
	}
	switch it.Topic {
	case contract.StreamTopicEvents:
		var e agent.Event
		if err := json.Unmarshal(p.GetData(), &e); err != nil { //workflowcheck:ignore
			return nil, fmt.Errorf("an event must be the JSON of an event object")
		}
		if e.Kind == "" || e.Index < 1 {
			return nil, fmt.Errorf("an event needs a kind and an event_index from 1")
		}
		return e, nil
	case contract.StreamTopicText:
		var s string
		if err := json.Unmarshal(p.GetData(), &s); err != nil { //workflowcheck:ignore
			return nil, fmt.Errorf("a text item must be a JSON string")
		}
		return s, nil
	}
	return nil, fmt.Errorf("topic %q: want %q or %q", words.Clip(it.Topic, 40), contract.StreamTopicEvents, contract.StreamTopicText)
}
