package eventlog

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/contract"
)

// The wire types of Workflow Streams, as Temporal's packages declare them
// (contrib/workflowstreams types.go): the envelopes travel as JSON through
// the default data converter, with these field names.

// PollInput is the poll update's argument: the topics wanted (none: all)
// and the global offset to read from.
type PollInput struct {
	Topics     []string `json:"topics"`
	FromOffset int64    `json:"from_offset"`
}

// WireItem is one item of a poll's answer: its topic, its value (Data: the
// standard base64 of a protobuf-marshalled temporal.api.common.v1.Payload
// made by the default payload converter) and its global offset.
type WireItem struct {
	Topic  string `json:"topic"`
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
}

// PollResult is the poll update's answer. Items is never null;
// NextOffset is where to poll next; MoreReady says the page was cut at the
// size budget, so the next poll should be made at once.
type PollResult struct {
	Items      []WireItem `json:"items"`
	NextOffset int64      `json:"next_offset"`
	MoreReady  bool       `json:"more_ready"`
}

// Error types of the protocol (the application errors' types; clients
// match on them, never on messages).
const (
	// ErrTypeTruncatedOffset fails a poll from an offset below the
	// stream's base (0 < from_offset < base, or a negative one): what was
	// there is gone. Clients poll again from 0. A turn's stream is never
	// truncated, so its base is 0 and only a negative offset meets it; a
	// Conversation's base is the first item its run was handed (Carry).
	ErrTypeTruncatedOffset = "TruncatedOffset"
	// ErrTypeStreamDraining refuses a poll (in the update's validator, so
	// it is not written to history) while the run drains before it
	// continues as new. Clients wait and poll again: its next run
	// answers, from the same offsets. A turn that ends refuses no poll
	// (DrainStream).
	ErrTypeStreamDraining = "StreamDraining"
)

// maxPollBytes bounds one poll's answer, as Temporal's packages do: the
// sum of each item's base64 data and topic. A page always holds at least
// one item, however large.
const maxPollBytes = 1_000_000

// entry is one item of the stream: the log's event at index, or (index 0)
// the text of a model reply.
type entry struct {
	index int64
	text  string
}

// topic is the entry's topic.
func (e entry) topic() string {
	if e.index == 0 {
		return contract.StreamTopicText
	}
	return contract.StreamTopicEvents
}

// AppendText puts the text of a model reply on the text topic. The turn
// calls it once the call that produced the reply has completed: a
// completed activity is never run again, so no retry can void the text.
func (l *Log) AppendText(text string) {
	if text != "" {
		l.entries = append(l.entries, entry{text: text})
	}
}

// Offset is the offset the stream's next item will have: the number of
// items so far (the offset query's answer).
func (l *Log) Offset() int64 { return l.base + int64(len(l.entries)) }

// ServeStream answers Workflow Streams' poll update and offset query over
// the log, and drops what the publish signal sends (see the package doc).
// Call it with the log's other handlers, before the workflow first
// blocks; call DrainStream before the workflow returns.
//
// gate says whether this run serves polls: the turn's workflow.GetVersion
// of the change that brought them. Each poll asks it, so that the marker
// is recorded in the runs that are polled only, where it is first polled.
func (l *Log) ServeStream(ctx workflow.Context, gate func(workflow.Context) bool) error {
	poll := func(ctx workflow.Context, in PollInput) (PollResult, error) {
		if !gate(ctx) {
			return PollResult{}, temporal.NewNonRetryableApplicationError("this run does not serve Workflow Streams", "StreamUnsupported", nil)
		}
		l.polled = true
		l.ReadTo(in.FromOffset)
		return l.poll(ctx, in)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateStreamPoll, poll, workflow.UpdateHandlerOptions{
		Validator: func(_ workflow.Context, _ PollInput) error {
			// A stream that has ended still answers a poll that reaches
			// it, at once and with all it holds: no run follows where the
			// subscriber could read it, as one does a run that continues
			// as new.
			if l.draining && !l.ended {
				return temporal.NewApplicationError("workflow is draining: it is about to continue as new", ErrTypeStreamDraining)
			}
			return nil
		},
		Description: `Workflow Streams: items from {"topics":["events"|"text"],"from_offset":N}; waits until there are some`,
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryStreamOffset, func() (int64, error) {
		return l.Offset(), nil
	}, workflow.QueryHandlerOptions{Description: "Workflow Streams: the offset the next item will have"}); err != nil {
		return err
	}
	publish := workflow.GetSignalChannelWithOptions(ctx, contract.SignalStreamPublish, workflow.SignalChannelOptions{
		Description: "Workflow Streams publish: not taken (a turn's log is written by the turn only); logged and dropped",
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var raw json.RawMessage
			publish.Receive(ctx, &raw)
			workflow.GetLogger(ctx).Warn("Workflow Streams publish signal dropped: a turn's log takes no events from outside", "bytes", len(raw))
		}
	})
	return nil
}

// ReadTo records that a subscriber has read the stream up to offset (a
// poll from offset came): the log keeps the furthest such offset within
// the stream. Subscribers are not told apart: with several, it is where
// the furthest had read to.
func (l *Log) ReadTo(offset int64) {
	if offset >= l.base {
		l.read = max(l.read, min(offset, l.Offset()))
	}
}

// StreamGrace is how long a polled run keeps answering polls after its
// last event before it drains: a subscriber between two polls (Temporal's
// clients wait 100 ms after a page that was not cut) comes back within
// it and reads the end of the stream; an update cannot reach a closed
// workflow.
const StreamGrace = time.Second

// StreamCatchUp is how long a turn's last run waits for a subscriber that
// polled the runs before it to reach it (DrainStream): the subscriber
// polls again once the run before has closed, which on a loaded server
// takes seconds.
const StreamCatchUp = 10 * time.Second

// DrainStream ends the stream before the workflow returns. The run keeps
// answering polls until open (the turn's window for subscribers to come:
// agent.TurnRequest.StreamWindowSec, from its start), and a run that was
// polled for StreamGrace more at least; then the polls waiting are
// answered with what the log holds, a poll that still reaches the run is
// answered at once, and it returns once every update handler has
// finished — so a subscriber polling while the turn ends has every event
// through the final status, and none is left with a poll the closed
// workflow cannot answer.
//
// Why a turn waits only when asked to or polled: an update cannot reach
// a closed workflow, so a subscriber whose first poll comes after the
// close gets nothing (Temporal's clients end such a subscription with no
// item and no error). Holding every run open for such subscribers would
// hold back every turn's result — the workflow's result, which Invoke,
// the gRPC stream's end, parent workflows and `temporal workflow result`
// wait for, is only there once the workflow has closed — so a turn
// lingers only when someone is reading (polled) or when its starter asked
// for a window. A run no one polled and that asked for no window (and
// every run recorded before either) neither waits nor blocks: it returns
// as it did.
//
// A window that has passed by the end still takes one more workflow
// task (windowed): a poll that came while this task ran — a turn's local
// model call holds one task from its start to its answer — reaches the
// run only in the next, and a workflow that closes in this one aborts it.
func (l *Log) DrainStream(ctx workflow.Context, open time.Time, windowed bool) {
	// The turn's own context may be cancelled; the polls are answered all
	// the same.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if !l.polled && l.read >= 0 {
		// A subscriber read the runs before this one and has not reached
		// it yet: it was sent away as the last run handed on, and a short
		// last run can end before its next poll arrives. The run waits
		// for that poll a while, as it would keep answering a subscriber
		// it had seen.
		_, _ = workflow.AwaitWithOptions(dctx, workflow.AwaitOptions{
			Timeout: StreamCatchUp, TimerOptions: workflow.TimerOptions{Summary: "Workflow Streams subscriber of the runs before"},
		}, func() bool { return l.polled })
	}
	now := workflow.Now(dctx)
	until, summary := open, "Workflow Streams window for subscribers to come"
	if l.polled && now.Add(StreamGrace).After(until) {
		until, summary = now.Add(StreamGrace), "Workflow Streams subscribers reading the end"
	}
	if windowed && !until.After(now) {
		until, summary = now.Add(time.Millisecond), "Workflow Streams polls that came during the last task"
	}
	if until.After(now) {
		_ = workflow.NewTimerWithOptions(dctx, until.Sub(now), workflow.TimerOptions{Summary: summary}).Get(dctx, nil)
	}
	l.ended = true
	l.DetachPollers()
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
}

// poll is the poll update's handler: it waits until the stream has an
// item at or after from_offset (any topic), or drains, then answers a page
// of the items of the topics asked for.
func (l *Log) poll(ctx workflow.Context, in PollInput) (PollResult, error) {
	truncated := false
	// Answered even while the turn is being cancelled: the turn still
	// logs how it ends.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(dctx, func() bool {
		if l.draining {
			return true
		}
		if in.FromOffset != 0 && in.FromOffset < l.base {
			truncated = true
			return true
		}
		return l.Offset() > max(in.FromOffset, l.base)
	}); err != nil {
		return PollResult{}, err
	}
	if truncated {
		return PollResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("offset %d has been truncated; the stream starts at %d: poll from 0", in.FromOffset, l.base), ErrTypeTruncatedOffset, nil)
	}
	return l.page(in)
}

// page is the items from in.FromOffset (0: the stream's start) of the
// topics asked for, up to the size budget.
func (l *Log) page(in PollInput) (PollResult, error) {
	res := PollResult{Items: make([]WireItem, 0), NextOffset: l.Offset()}
	size := 0
	for i := max(in.FromOffset-l.base, 0); i < int64(len(l.entries)); i++ {
		e := l.entries[i]
		topic := e.topic()
		if len(in.Topics) > 0 && !slices.Contains(in.Topics, topic) {
			continue
		}
		data, err := l.encode(e)
		if err != nil {
			return PollResult{}, err
		}
		n := len(data) + len(topic)
		if size+n > maxPollBytes && len(res.Items) > 0 {
			res.NextOffset, res.MoreReady = l.base+i, true
			break
		}
		size += n
		res.Items = append(res.Items, WireItem{Topic: topic, Data: data, Offset: l.base + i})
	}
	return res, nil
}

// encode is an item's value on the wire: the standard base64 of the
// protobuf of the Payload the default payload converter makes of it (the
// event, or the text as a JSON string).
func (l *Log) encode(e entry) (string, error) {
	var v any = e.text
	if e.index > 0 {
		v = l.events[e.index-1-l.skipped]
	}
	// Encoding JSON and protobuf is deterministic (the payload's metadata
	// is one key, and marshalled deterministically); workflowcheck cannot
	// tell.
	p, err := converter.GetDefaultDataConverter().ToPayload(v) //workflowcheck:ignore
	if err != nil {
		return "", fmt.Errorf("encode stream item: %w", err)
	}
	return encodePayload(p)
}

func encodePayload(p *commonpb.Payload) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p) //workflowcheck:ignore
	if err != nil {
		return "", fmt.Errorf("encode stream item: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
