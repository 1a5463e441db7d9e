package eventlog

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

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
	unsent, held := slices.Clone(b.unsent), b.held
	b.mu.Unlock()
	if len(unsent) == 0 {
		return true
	}
	err := b.sink.Append(ctx, agent.TokenBatch{StreamID: b.streamID, Step: b.step, Attempt: b.attempt, First: unsent[0].Index, Events: unsent}, held)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.sent = append(b.sent, unsent...)
		b.unsent = b.unsent[len(unsent):]
		b.held = true
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
