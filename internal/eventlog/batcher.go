package eventlog

import (
	"context"
	"slices"
	"sync"
	"time"

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
	// (Appender.Append): the log takes it with the call's result. held:
	// the attempt holds the stream already (it claimed it, or appended
	// before).
	Append(ctx context.Context, b agent.TokenBatch, held bool) error
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
	// held: the attempt holds the stream (it claimed it, or an append
	// of it was stored), so its appends only continue its own claim and
	// never claim the stream anew (Appender.Append): once the turn has
	// sealed the call and forgotten the stream, an attempt still running
	// appends nothing.
	held bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// StartBatcher starts the sender for one attempt of a call; ctx is the
// activity's. On a retried attempt it first fences off what earlier
// attempts streamed, as the package doc describes (Steps, attempts and
// fencing). Then it starts sending: first what the turn handed the call,
// while the caller goes on to call the model.
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
		b.first, b.sent, b.held = first, prefix, true
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

// LastIndex is the index of the last event the turn took from the call:
// what its heartbeats say.
func (b *Batcher) LastIndex() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}
