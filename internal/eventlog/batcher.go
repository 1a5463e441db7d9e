package eventlog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Sink is where a streaming model call's batches go (Sinks over Temporal
// and the live path).
type Sink interface {
	// Send delivers a batch: to the turn's log first, the durable record,
	// then on the live path. An error means the call must stop streaming:
	// the turn did not take the batch, or a newer attempt has fenced the
	// stream (ErrFenced).
	Send(ctx context.Context, b agent.TokenBatch) error
	// SendFirst is Send for a retried attempt's first batch, which goes on
	// the live path only once the turn's log shows it took it
	// (ErrNotTaken: an earlier attempt that still runs got in first).
	SendFirst(ctx context.Context, b agent.TokenBatch) error
	// Fence makes a retried attempt the stream's newest before it reads
	// the head: no earlier attempt publishes after it (Fencer).
	Fence(ctx context.Context, streamID string, step, attempt int) error
	// Head is the index the turn's log gives its next event.
	Head(ctx context.Context, streamID string) (int64, error)
	// HandOn publishes on the live path what the turn handed the activity
	// (contract.Live).
	HandOn(ctx context.Context, streamID string, live contract.Live)
	// Append stores a batch of a live-first call and publishes it
	// (Appender.Append): the log takes it with the call's result.
	Append(ctx context.Context, b agent.TokenBatch) error
	// Claim fences earlier attempts off the stream and returns what they
	// stored from index from on (Appender.Claim).
	Claim(ctx context.Context, streamID string, step, attempt int, from int64) ([]agent.Event, error)
	// Stored returns what live-first calls stored after index after,
	// claiming nothing (Appender.Stored).
	Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error)
}

// Call is one attempt of a streaming model call, as the batcher stamps its
// events.
type Call struct {
	StreamID string
	Step     int   // the turn's step: CallModel's seq
	Attempt  int   // the activity's attempt, from 1
	First    int64 // the index of the call's first event (CallModelInput.FirstIndex)
	// Live is what the turn handed the call to publish before its own
	// events.
	Live contract.Live
	// LiveFirst: the call's batches go to the live path as they stream,
	// stored (Appender), and to the log all at once, with the call's
	// result (contract.CallModelInput.LiveFirst).
	LiveFirst bool
	// Local: the call runs inside the turn's workflow task (a local
	// activity), so the turn's log takes nothing while it runs: its head
	// is First, and the turn answers no query for it until the call ends.
	Local bool
}

// Batcher batches what a model call streams — its answer's text, its
// reasoning and its tool calls' argument fragments — into token,
// reasoning and tool_args_delta events, in the order the model sent them,
// and sends each batch to its Sink. Consecutive fragments of one kind (and
// of one tool call) become one event. The first text or reasoning goes
// out at once, for a fast first token (argument fragments alone wait the
// interval: a model that writes a tool call quickly hands its arguments
// on in its result, sparing the turn a signal and a workflow task, and
// the call's tool_start follows them at once); after that a batch leaves every interval,
// or sooner when it reaches maxBytes, and never while the previous one is
// still being sent — so a slow server gets fewer, larger batches instead
// of a queue. It heartbeats the last index sent every second: the
// activity's heartbeat timeout notices a lost worker, and the details say
// how far it got.
type Batcher struct {
	sink     Sink
	interval time.Duration
	maxBytes int
	streamID string
	step     int
	attempt  int
	// retried: the next batch is a retried attempt's first, sent with
	// SendFirst. Only the sending goroutine reads and clears it.
	retried bool

	mu      sync.Mutex
	pending []agent.Event // events to send before the streamed ones (RETRYING)
	// streamed are the events built from the model's fragments since the
	// last batch, in order; size counts their bytes.
	streamed []agent.Event
	size     int
	next     int64 // index of the next event
	err      error
	// keepTail: at the stop, what is buffered stays for CloseTail.
	keepTail bool
	// liveFirst: batches are appended to the live path, not signalled;
	// sent is every event appended for the call since first (earlier
	// attempts' included), which the call's result hands the log.
	liveFirst bool
	first     int64
	sent      []agent.Event
	// unsent are events a live-first call could not append yet (the live
	// path is down): they go with the next append, or in the result.
	unsent []agent.Event

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// StartBatcher starts the sender for one attempt of a call; ctx is the
// activity's. On a retried attempt it first fences off what earlier
// attempts streamed: the stream is fenced against earlier attempts that
// still run (Sink.Fence, Sink.Claim), the log's head is read from the
// turn (the authority: an earlier attempt may have died between a signal
// and its heartbeat), and a RETRYING event voids the indices from the
// call's first on; a signalled retry's first batch goes live only once
// the turn has taken it (Sink.SendFirst). Then it starts sending: first
// what the turn handed the call, while the caller goes on to call the
// model.
func StartBatcher(ctx context.Context, sink Sink, c Call, interval time.Duration, maxBytes int) (*Batcher, error) {
	b := &Batcher{
		sink: sink, interval: interval, maxBytes: maxBytes,
		streamID: c.StreamID, step: c.Step, attempt: c.Attempt,
		next: c.First, liveFirst: c.LiveFirst, first: c.First,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	switch {
	case c.LiveFirst && c.Attempt > 1:
		first, prefix, err := claim(ctx, sink, c)
		if err != nil {
			return nil, err
		}
		b.first, b.sent = first, prefix
		b.next = first + int64(len(prefix))
		if b.next > c.First {
			b.pending = append(b.pending, retrying(c))
		}
	case c.Attempt > 1:
		head, err := fencedHead(ctx, sink, c)
		if err != nil {
			return nil, err
		}
		if head > c.First {
			b.next = head
			b.pending = append(b.pending, retrying(c))
		}
		b.retried = true
	}
	go b.run(ctx, c.Live)
	if len(b.pending) > 0 {
		b.poke()
	}
	return b, nil
}

// fencedHead fences a signalled call's earlier attempts off the live
// path, then reads the log's head: an earlier attempt that still runs (the
// turn gave up on it, as on one that waited on this very read past its
// heartbeat timeout) publishes nothing after the fence, and what it got
// into the log before the read is behind the head.
func fencedHead(ctx context.Context, sink Sink, c Call) (int64, error) {
	if err := sink.Fence(ctx, c.StreamID, c.Step, c.Attempt); err != nil {
		return 0, err
	}
	return sink.Head(ctx, c.StreamID)
}

// claim fences a live-first call's earlier attempts off its stream: it
// returns the index its result's batch starts at (the log's head) and what
// they stored from there, which the batch carries first.
func claim(ctx context.Context, sink Sink, c Call) (int64, []agent.Event, error) {
	first := c.First
	if !c.Local {
		head, err := sink.Head(ctx, c.StreamID)
		if err != nil {
			return 0, nil, err
		}
		first = max(head, c.First)
	}
	prefix, err := sink.Claim(ctx, c.StreamID, c.Step, c.Attempt, first)
	if err != nil {
		return 0, nil, err
	}
	return first, prefix, nil
}

// retrying is the RETRYING status that voids what earlier attempts of the
// call streamed.
func retrying(c Call) agent.Event {
	return agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: c.First, Attempt: c.Attempt, Step: c.Step}
}

// Restream is the batch that replaces whatever earlier attempts of a call
// streamed with its stored reply: a RETRYING event voiding their events,
// if the log has any, then the reply's text as one token event and each
// of its tool calls' arguments as one tool_args_delta event. (The reply's
// reasoning is not stored: what the log held of it is voided, and not
// replaced.) The call returns it as its last batch
// (contract.CallModelResult.Tail); false when there is nothing to send.
func Restream(ctx context.Context, sink Sink, c Call, content string, calls []agent.ToolCall) (agent.TokenBatch, bool, error) {
	if c.LiveFirst {
		return restreamLive(ctx, sink, c, content, calls)
	}
	head, err := fencedHead(ctx, sink, c)
	if err != nil {
		return agent.TokenBatch{}, false, err
	}
	first := max(head, c.First)
	events := replyEvents(c, head > c.First, content, calls)
	if len(events) == 0 {
		return agent.TokenBatch{}, false, nil
	}
	for i := range events {
		events[i].StreamID, events[i].Index = c.StreamID, first+int64(i)
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: first, Events: events}, true, nil
}

// restreamLive is Restream for a live-first call: what earlier attempts
// stored, then the replacement, which is appended to the live path too.
func restreamLive(ctx context.Context, sink Sink, c Call, content string, calls []agent.ToolCall) (agent.TokenBatch, bool, error) {
	first, prefix, err := claim(ctx, sink, c)
	if err != nil {
		return agent.TokenBatch{}, false, err
	}
	next := first + int64(len(prefix))
	events := replyEvents(c, next > c.First, content, calls)
	for i := range events {
		events[i].StreamID, events[i].Index = c.StreamID, next+int64(i)
	}
	if len(events) > 0 {
		if err := sink.Append(ctx, agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: next, Events: events}); err != nil {
			return agent.TokenBatch{}, false, err
		}
	}
	all := append(prefix, events...)
	if len(all) == 0 {
		return agent.TokenBatch{}, false, nil
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: first, Events: all}, true, nil
}

// Shown is what the attempts of a live-first call stored from its first
// index on, in order, claiming nothing: the events its followers were
// shown. A local call that runs again after its workflow task was lost
// with its worker, and finds its reply stored, takes them as they were
// (Behind): the turn runs on from there and logs what comes after at
// the indices followers already hold. Claiming the stream instead would
// void them after what followers saw since, and a later step may have
// claimed it already.
func Shown(ctx context.Context, sink Sink, c Call) ([]agent.Event, error) {
	stored, err := sink.Stored(ctx, c.StreamID, c.First-1)
	if err != nil {
		return nil, err
	}
	shown := make([]agent.Event, 0, len(stored))
	for i, e := range stored {
		// The call's own: what the turn handed on after it is not.
		if e.Index != c.First+int64(i) || e.Step != c.Step || !batched(e) {
			break
		}
		shown = append(shown, e)
	}
	return shown, nil
}

// ShowsReply reports whether events show a reply whole: its text and
// each of its tool calls' arguments, without what a RETRYING voided.
func ShowsReply(events []agent.Event, content string, calls []agent.ToolCall) bool {
	if agent.ReplayText(events) != content {
		return false
	}
	args := map[string]string{}
	for _, e := range agent.Unvoided(events) {
		if e.Kind == agent.EventToolArgsDelta && e.Tool != nil {
			args[e.Tool.CallID] += e.Tool.ArgsDelta
		}
	}
	for _, tc := range calls {
		if args[tc.ID] != tc.Arguments {
			return false
		}
	}
	return true
}

// Behind is the batch of a live-first call whose reply is stored, made of
// what it showed (Shown), and the index of its last event on the live
// path. When what was shown is not the whole reply (the live path was
// down while the call streamed) and the stream cannot be claimed (a later
// step owns it), the batch voids it and carries the reply whole, off the
// live path, as Restream's does.
func Behind(c Call, shown []agent.Event, content string, calls []agent.ToolCall) (agent.TokenBatch, int64, bool) {
	for _, e := range shown {
		c.Attempt = max(c.Attempt, e.Attempt)
	}
	live := c.First + int64(len(shown)) - 1
	events := slices.Clone(shown)
	if !ShowsReply(shown, content, calls) {
		replay := replyEvents(c, len(shown) > 0, content, calls)
		for i := range replay {
			replay[i].StreamID, replay[i].Index = c.StreamID, live+1+int64(i)
		}
		events = append(events, replay...)
	}
	if len(events) == 0 {
		return agent.TokenBatch{}, 0, false
	}
	if len(shown) == 0 {
		live = 0
	}
	return agent.TokenBatch{StreamID: c.StreamID, Step: c.Step, Attempt: c.Attempt, First: c.First, Events: events}, live, true
}

// replyEvents are a stored reply's events: a RETRYING that voids what
// earlier attempts streamed when void, the text as one token event and
// each tool call's arguments as one tool_args_delta event.
func replyEvents(c Call, void bool, content string, calls []agent.ToolCall) []agent.Event {
	var events []agent.Event
	if void {
		events = append(events, retrying(c))
	}
	if content != "" {
		events = append(events, agent.Event{Kind: agent.EventToken, Text: content, Step: c.Step, Attempt: c.Attempt})
	}
	for _, tc := range calls {
		events = append(events, agent.Event{Kind: agent.EventToolArgsDelta, Step: c.Step, Attempt: c.Attempt,
			Tool: &agent.ToolEvent{CallID: tc.ID, Name: tc.Name, ArgsDelta: tc.Arguments}})
	}
	return events
}

// Add takes a fragment of the answer's text (a token event). Like
// AddReasoning and AddToolArgs it never blocks on the network; an error
// says the turn cannot take more, and stops the model call.
func (b *Batcher) Add(_ context.Context, text string) error {
	if text == "" {
		return b.failure()
	}
	return b.add(agent.EventToken, text, nil)
}

// AddReasoning takes a fragment of the model's reasoning (a reasoning
// event).
func (b *Batcher) AddReasoning(_ context.Context, text string) error {
	if text == "" {
		return b.failure()
	}
	return b.add(agent.EventReasoning, text, nil)
}

// AddToolArgs takes a fragment of the JSON arguments of the tool call
// callID of tool name (a tool_args_delta event). An empty fragment
// announces the call: its event is sent even with no arguments yet.
func (b *Batcher) AddToolArgs(_ context.Context, callID, name, fragment string) error {
	return b.add(agent.EventToolArgsDelta, fragment, &agent.ToolEvent{CallID: callID, Name: name})
}

// add appends a fragment to the last streamed event when it continues it
// (same kind, same tool call), else as a new event.
func (b *Batcher) add(kind agent.EventKind, text string, call *agent.ToolEvent) error {
	b.mu.Lock()
	if err := b.err; err != nil {
		b.mu.Unlock()
		return err // stop the model call: the turn cannot take more
	}
	n := len(b.streamed)
	switch last := n - 1; {
	case n > 0 && b.streamed[last].Kind == kind && kind != agent.EventToolArgsDelta:
		b.streamed[last].Text += text
	case n > 0 && b.streamed[last].Kind == kind && b.streamed[last].Tool.CallID == call.CallID:
		b.streamed[last].Tool.ArgsDelta += text
	case kind == agent.EventToolArgsDelta:
		call.ArgsDelta = text
		b.streamed = append(b.streamed, agent.Event{Kind: kind, Tool: call})
	default:
		b.streamed = append(b.streamed, agent.Event{Kind: kind, Text: text})
	}
	b.size += len(text)
	b.mu.Unlock()
	b.poke()
	return nil
}

// failure is the error of a send that failed, if one has.
func (b *Batcher) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *Batcher) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Close sends what is left and waits; it returns the first send error.
func (b *Batcher) Close() error {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// CloseTail stops like Close but does not send what is buffered: it is
// returned as the call's last batch (false when there is none), for the
// call's result.
//
// A live-first call appends what is buffered, then returns every event
// it appended since its first (with what earlier attempts stored) and
// what the live path could not take: all of it goes to the log at once.
// The live path then holds the whole reply, which a call run again after
// its workflow task was lost takes as it was shown (Shown).
func (b *Batcher) CloseTail() (agent.TokenBatch, bool, error) {
	if b.liveFirst {
		if err := b.Close(); err != nil {
			return agent.TokenBatch{}, false, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		events := slices.Concat(b.sent, b.unsent)
		if len(events) == 0 {
			return agent.TokenBatch{}, false, nil
		}
		return agent.TokenBatch{StreamID: b.streamID, Step: b.step, Attempt: b.attempt, First: b.first, Events: events}, true, nil
	}
	b.mu.Lock()
	b.keepTail = true
	b.mu.Unlock()
	if err := b.Close(); err != nil {
		return agent.TokenBatch{}, false, err
	}
	batch, ok := b.take()
	return batch, ok, nil
}

// Published is the index of the last event a live-first call has
// appended to the live path (0: none): CloseTail's batch holds it and
// those before it, and what the live path could not take after it (it
// was down), which the turn hands on.
func (b *Batcher) Published() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.liveFirst || len(b.sent) == 0 {
		return 0
	}
	return b.sent[len(b.sent)-1].Index
}

// Abort stops without sending what is buffered: the attempt failed and
// its text will be voided by the next attempt.
func (b *Batcher) Abort() {
	b.mu.Lock()
	b.streamed, b.size = nil, 0
	b.pending = nil
	b.mu.Unlock()
	_ = b.Close()
}

// Done is closed once the batcher has stopped sending.
func (b *Batcher) Done() <-chan struct{} { return b.done }

// finish sends what is buffered at the stop, unless CloseTail keeps it.
func (b *Batcher) finish(ctx context.Context) {
	b.mu.Lock()
	keep := b.keepTail
	b.mu.Unlock()
	if !keep {
		b.flush(ctx)
	}
}

// run sends batches until Close or the end of the call's context.
func (b *Batcher) run(ctx context.Context, live contract.Live) {
	defer close(b.done)
	// What the turn handed the call leaves before the call's own batches,
	// on this goroutine, and no model call waits for it.
	b.sink.HandOn(ctx, b.streamID, live)
	heartbeat := time.NewTicker(time.Second)
	defer heartbeat.Stop()
	start := time.Now()
	var last time.Time // zero: the first batch of text leaves at once
	for {
		select {
		case <-b.kick:
		case <-heartbeat.C:
			activity.RecordHeartbeat(ctx, b.LastIndex())
			continue
		case <-b.stop:
			b.finish(ctx)
			return
		case <-ctx.Done():
			return
		}
		// Only argument fragments so far: no hurry, until text comes.
		since := func() time.Time {
			if last.IsZero() && !b.visible() {
				return start
			}
			return last
		}
		switch b.wait(ctx, since) {
		case waitStopped:
			b.finish(ctx)
			return
		case waitCanceled:
			return
		}
		if !b.flush(ctx) {
			return
		}
		last = time.Now()
	}
}

type waitOutcome int

const (
	waitDue waitOutcome = iota
	waitStopped
	waitCanceled
)

// wait waits until the interval since the last batch has passed, unless
// the batch fills up first. since is asked again at each new fragment:
// text after a call's first arguments leaves at once, also when the
// arguments' kick began the wait.
func (b *Batcher) wait(ctx context.Context, since func() time.Time) waitOutcome {
	for {
		d := b.interval - time.Since(since())
		if d <= 0 || b.buffered() >= b.maxBytes {
			return waitDue
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return waitDue
		case <-b.kick:
			t.Stop()
		case <-b.stop:
			t.Stop()
			return waitStopped
		case <-ctx.Done():
			t.Stop()
			return waitCanceled
		}
	}
}

// visible says whether what waits to be sent holds text or reasoning: what
// a reader shows as it streams.
func (b *Batcher) visible() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.streamed {
		if e.Kind != agent.EventToolArgsDelta {
			return true
		}
	}
	return len(b.pending) > 0
}

// buffered is what waits to be sent of the model's fragments, in bytes.
func (b *Batcher) buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// LastIndex is the index of the last event the turn took from the call:
// what its heartbeats say.
func (b *Batcher) LastIndex() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}

// take moves the buffered events into a batch; false when there are none.
func (b *Batcher) take() (agent.TokenBatch, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	events := append(b.pending, b.streamed...)
	b.pending, b.streamed, b.size = nil, nil, 0
	if len(events) == 0 {
		return agent.TokenBatch{}, false
	}
	batch := agent.TokenBatch{StreamID: b.streamID, Step: b.step, Attempt: b.attempt, First: b.next, Events: events}
	for i := range events {
		events[i].StreamID = b.streamID
		events[i].Index = b.next + int64(i)
		if events[i].Kind.Streamed() {
			events[i].Step, events[i].Attempt = b.step, b.attempt
		}
	}
	return batch, true
}

// flushLive appends the buffered events of a live-first call, with those
// an earlier append could not store, as one batch; false once fenced. A
// live path that is down (Postgres away) fails nothing: the call streams
// on, its events wait for the next append or for the call's result, and
// its followers, which read the log meanwhile, get them with the result.
func (b *Batcher) flushLive(ctx context.Context) bool {
	batch, ok := b.take()
	b.mu.Lock()
	if ok {
		b.next = batch.First + int64(len(batch.Events))
		b.unsent = append(b.unsent, batch.Events...)
	}
	unsent := slices.Clone(b.unsent)
	b.mu.Unlock()
	if len(unsent) == 0 {
		return true
	}
	err := b.sink.Append(ctx, agent.TokenBatch{StreamID: b.streamID, Step: b.step, Attempt: b.attempt, First: unsent[0].Index, Events: unsent})
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.sent = append(b.sent, unsent...)
		b.unsent = b.unsent[len(unsent):]
	case errors.Is(err, ErrFenced) || ctx.Err() != nil:
		b.err = err
		return false
	}
	return true
}

// flush sends the buffered events as one batch; false after a failure.
func (b *Batcher) flush(ctx context.Context) bool {
	b.mu.Lock()
	failed := b.err != nil
	b.mu.Unlock()
	if failed {
		return false
	}
	if b.liveFirst {
		return b.flushLive(ctx)
	}
	batch, ok := b.take()
	if !ok {
		return true
	}
	send := b.sink.Send
	if b.retried {
		send = b.sink.SendFirst
	}
	if err := send(ctx, batch); err != nil {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
		return false
	}
	b.retried = false
	last := batch.First + int64(len(batch.Events)) - 1
	b.mu.Lock()
	b.next = last + 1
	b.mu.Unlock()
	// No heartbeat here: the ticker's carries the last index, and a short
	// call is spared the server round trip of a heartbeat of its own.
	return true
}
