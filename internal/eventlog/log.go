package eventlog

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
)

// Log is a turn's event log, the workflow side: the turn appends its own
// events (status, tools, usage) and accepts the token batches of its
// streaming model calls, fenced by step and attempt, so that a late or
// repeated batch of a failed attempt never enters the log. It answers the
// events query and hands what it logged on to the next activity to
// publish live.
//
// Everything here runs inside the workflow: it is deterministic, reads no
// clock and does no I/O.
type Log struct {
	streamID string
	events   []agent.Event
	// skipped is the number of events before events[0]: those of earlier
	// runs that a Conversation did not carry (Restore); 0 for a turn.
	skipped int64
	// earlierRun is the run that holds the events before events[0], for
	// a turn that continued as new (Earlier).
	earlierRun string
	// step is the CallModel whose batches are accepted (0: none); attempt
	// is the highest attempt of it seen so far.
	step    int
	attempt int
	dropped int // batches refused, for the logs
	// handed counts the events handed to activities to publish live
	// (HandOn) or published by CallModel as token batches.
	handed int
	// tokens receives the token batches of the model call in flight
	// (contract.SignalTokens); nil until Register.
	tokens workflow.ReceiveChannel

	// entries are the items of the log's Workflow Stream, in offset order
	// from base: each event, and the text of each model reply once final
	// (streams.go). base is 0 on a stream's first run; a run that
	// continues another starts from what it was handed (Restore).
	entries []entry
	base    int64
	// read is the furthest offset a Workflow Streams poll came from, in
	// this run or, carried, an earlier one (ReadTo); -1 until one has.
	read int64
	// polled is set once the run has answered a poll (ServeStream),
	// draining once the run's stream ends (DrainStream, DetachPollers),
	// ended once the stream itself has (DrainStream: no run follows).
	polled, draining, ended bool

	// msg is the message whose turn a Conversation's log takes events
	// from (conversation.go); nil between messages and in a turn's log.
	msg *message
}

// New returns the empty log of the stream (the turn's workflow id).
func New(streamID string) *Log { return &Log{streamID: streamID, read: -1} }

// Register registers the events query, which reports tenantID as the
// turn's tenant, and the tokens signal. Batches are only ever received by
// the workflow's main coroutine (ReceiveBatches, TakeBatches): a second
// coroutine blocked in Receive would take a batch off the channel and
// might run only after the main one had closed the step.
func (l *Log) Register(ctx workflow.Context, tenantID string) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryEvents, func(q agent.EventsQuery) (agent.EventsPage, error) {
		p := l.Page(q)
		p.TenantID = tenantID
		return p, nil
	}, workflow.QueryHandlerOptions{Description: `events after {"after_index": N}; {"head_only": true} for the next index only`}); err != nil {
		return err
	}
	l.tokens = workflow.GetSignalChannelWithOptions(ctx, contract.SignalTokens, workflow.SignalChannelOptions{
		Description: "token batches of a streaming model call (sent by CallModel)",
	})
	return nil
}

// Earlier names the run that holds the log's events before those this
// run was handed (Restore): a reader that asks for them is pointed there
// (agent.EventsPage.EarlierRunID).
func (l *Log) Earlier(runID string) { l.earlierRun = runID }

// Next is the index the next event will have.
func (l *Log) Next() int64 { return l.skipped + int64(len(l.events)) + 1 }

// Append logs an event of the turn's own at the next index and returns it
// as logged.
func (l *Log) Append(e agent.Event) agent.Event {
	e.StreamID = l.streamID
	e.Index = l.Next()
	l.events = append(l.events, e)
	l.entries = append(l.entries, entry{index: e.Index})
	return e
}

// AppendChild logs the events of a child turn's batch (its token batches,
// or one of its tool events) as child events of the call callID.
func (l *Log) AppendChild(b agent.TokenBatch, callID string) {
	for _, e := range b.Events {
		e.Child = &agent.ChildEvent{CallID: callID, StreamID: b.StreamID, Index: e.Index}
		l.Append(e)
	}
}

// OpenStep starts accepting the token batches of step's model call, from
// its first attempt on.
func (l *Log) OpenStep(step int) { l.step, l.attempt = step, 0 }

// CloseStep stops accepting token batches: the call has ended.
func (l *Log) CloseStep() { l.step = 0 }

// Accept appends a batch if it continues the log for the current step and
// is not from an attempt older than one already seen. A batch may hold
// what a model call streams (token, reasoning and tool_args_delta events,
// each of its kind's shape) and RETRYING statuses, nothing else: it cannot
// end the stream, nor speak for a child turn.
func (l *Log) Accept(b agent.TokenBatch) bool {
	if b.Step != l.step || b.Attempt < l.attempt || b.First != l.Next() || len(b.Events) == 0 {
		l.dropped++
		return false
	}
	for i, e := range b.Events {
		if e.Index != b.First+int64(i) || !batched(e) {
			l.dropped++
			return false
		}
	}
	l.attempt = b.Attempt
	for _, e := range b.Events {
		l.Append(e)
	}
	return true
}

// batched reports whether a batch may carry e.
func batched(e agent.Event) bool {
	if e.Child != nil || !e.Kind.Streamed() && (e.Kind != agent.EventStatus || e.Status != agent.StreamRetrying) {
		return false
	}
	return e.Validate() == nil
}

// TextFrom is the text the turn's model calls streamed from index first
// on, without what a RETRYING voided (agent.ReplayText): a stopped
// call's partial answer, from the call's first index.
func (l *Log) TextFrom(first int64) string {
	at := max(first-l.skipped-1, 0)
	if at >= int64(len(l.events)) {
		return ""
	}
	return agent.ReplayText(l.events[at:])
}

// Dropped is the number of batches refused so far.
func (l *Log) Dropped() int { return l.dropped }

// Page answers the events query.
func (l *Log) Page(q agent.EventsQuery) agent.EventsPage {
	p := agent.EventsPage{Next: l.Next(), Done: l.Done()}
	if l.skipped > 0 && l.earlierRun != "" {
		p.First, p.EarlierRunID = l.skipped+1, l.earlierRun
	}
	after := q.AfterIndex - l.skipped
	if q.HeadOnly || after < 0 || after >= int64(len(l.events)) {
		return p
	}
	evs := l.events[after:]
	if q.Limit > 0 && len(evs) > q.Limit {
		evs = evs[:q.Limit]
		p.Done = false
	}
	p.Events = append([]agent.Event(nil), evs...)
	return p
}

// Done reports whether the log holds its terminal event.
func (l *Log) Done() bool {
	return len(l.events) > 0 && l.events[len(l.events)-1].Terminal()
}

// Status is the latest status of the turn's own (not RETRYING, not a
// child's), "" before the first.
func (l *Log) Status() string {
	for i := len(l.events) - 1; i >= 0; i-- {
		if e := l.events[i]; e.Kind == agent.EventStatus && e.Status != agent.StreamRetrying && e.Child == nil {
			return e.Status
		}
	}
	return ""
}

// ReceiveBatches adds the tokens signal to sel: a batch is accepted as it
// arrives.
func (l *Log) ReceiveBatches(ctx workflow.Context, sel workflow.Selector) {
	signals.On(sel, l.tokens, func(b agent.TokenBatch) { l.acceptSignalled(ctx, b) })
}

// TakeBatches accepts the batches already received.
func (l *Log) TakeBatches(ctx workflow.Context) {
	if l.tokens == nil {
		return
	}
	signals.Drain(l.tokens, func(b agent.TokenBatch) { l.acceptSignalled(ctx, b) })
}

func (l *Log) acceptSignalled(ctx workflow.Context, b agent.TokenBatch) {
	if !l.Accept(b) {
		workflow.GetLogger(ctx).Debug("token batch refused", "step", b.Step, "attempt", b.Attempt, "first", b.First, "next", l.Next())
		return
	}
	// CallModel publishes a batch once the turn has taken it.
	if b.First == int64(l.handed)+1 {
		l.handed += len(b.Events)
	}
}

// AcceptTail accepts a call's last batch, which it returned with its
// result instead of signalling (contract.CallModelResult.Tail): logged as
// its signal would have been, and published by the activity that follows.
//
// live is the index of the batch's last event that is on the live path
// already (a live-first call's, 0: none): when everything before the
// batch has been handed on, those events are not handed on again.
func (l *Log) AcceptTail(ctx workflow.Context, b *agent.TokenBatch, live int64) {
	if b == nil {
		return
	}
	at := len(l.events)
	if !l.Accept(*b) {
		workflow.GetLogger(ctx).Debug("last token batch refused", "step", b.Step, "attempt", b.Attempt, "first", b.First, "next", l.Next())
		return
	}
	if l.handed == at && live >= b.First {
		l.handed += int(min(live-b.First+1, int64(len(b.Events))))
	}
}

// Polled reports whether a Workflow Streams subscriber has polled the run
// (ServeStream).
func (l *Log) Polled() bool { return l.polled }

// MaxLiveBytes bounds the events handed to one activity: they travel in
// its input (the history) and in one notification.
const MaxLiveBytes = 6 << 10

// HandOn is what the next activity publishes live (contract.Live): the
// events logged since the last hand-on, or a wake-up when they are too
// large. Followers of a streamed turn then read nothing while it runs: the
// turn's own events (status, usage, tools) reach them from the activity
// that follows, its tokens from CallModel. An unstreamed turn hands on
// nothing and its tool calls wake followers, if any, to read the log.
func (l *Log) HandOn(streamed bool) contract.Live {
	live := l.Unhanded(streamed)
	l.handed = len(l.events)
	return live
}

// Unhanded is what HandOn would hand on, without marking it handed: what
// SaveResult publishes with the closing events, which the close's tail
// (Tail) carries again for a follower that missed them.
func (l *Log) Unhanded(streamed bool) contract.Live {
	evs := l.events[l.handed:]
	if len(evs) == 0 {
		return contract.Live{}
	}
	if !streamed {
		return contract.Live{Wake: true}
	}
	if liveBytes(evs) > MaxLiveBytes {
		return contract.Live{Wake: true}
	}
	return contract.Live{Events: slices.Clone(evs)}
}

// MaxTailBytes bounds the events a closing turn returns with its result
// (agent.TurnResult.StreamTail): they are kept in its history once more.
const MaxTailBytes = 16 << 10

// Tail is what a turn that has logged its terminal event returns for its
// followers (agent.TurnResult.StreamTail): the events logged since the
// last hand-on, ending with the terminal one; none when they are too
// large, when the turn is not streamed, or when the log has not ended.
func (l *Log) Tail(streamed bool) []agent.Event {
	evs := l.events[l.handed:]
	if !streamed || len(evs) == 0 || !evs[len(evs)-1].Terminal() {
		return nil
	}
	if liveBytes(evs) > MaxTailBytes {
		return nil
	}
	return slices.Clone(evs)
}

// liveBytes is a bound on the size of events as JSON (liveSize).
func liveBytes(evs []agent.Event) int {
	n := 0
	for _, e := range evs {
		n += liveSize(e)
	}
	return n
}

// liveSize is a bound on an event's size as JSON, from its strings (each
// counted twice, for escapes) and a fixed allowance for the rest; without
// encoding it, which workflow code must not (encoding/json caches by type).
// Events with a data preview or of a child turn count as too large: they
// are read from the log. The publisher checks the real size again.
func liveSize(e agent.Event) int {
	if e.Child != nil || e.Tool != nil && e.Tool.Data != nil {
		return MaxLiveBytes + 1
	}
	n := len(e.StreamID) + len(e.Text) + len(e.Content) + len(e.FinishReason)
	if t := e.Tool; t != nil {
		n += len(t.CallID) + len(t.Name) + len(t.Args) + len(t.ArgsDelta) + len(t.Output) + len(t.Reason) + len(t.Message) + len(t.Source) + len(t.FromToolkit)
	}
	if a := e.Approval; a != nil {
		n += len(a.Outcome) + len(a.Approver) + len(a.Reason) + len(a.Via)
	}
	if m := e.Message; m != nil {
		n += len(m.ID) + len(m.StreamID) + len(m.Status)
	}
	if c := e.Custom; c != nil {
		n += len(c.Name) + len(c.ID) + len(c.Value)
	}
	if e.Error != nil {
		n += len(e.Error.Type) + len(e.Error.Message) + len(e.Error.Tool)
	}
	return 2*n + 400
}
