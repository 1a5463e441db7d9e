package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// EventPublisher is the low-latency path of stream events to gateways. A
// batch is published only after the turn has accepted it as a signal, so
// the live path never shows what the log will not hold. Wake says that a
// stream has new events that only its log holds.
type EventPublisher interface {
	Publish(ctx context.Context, b agent.TokenBatch) error
	Wake(ctx context.Context, streamID string) error
}

// publishLive publishes what the turn handed the activity (contract.Live).
func (a *Activities) publishLive(ctx context.Context, streamID string, live contract.Live) {
	if a.events == nil || streamID == "" {
		return
	}
	var err error
	switch {
	case len(live.Events) > 0:
		err = a.events.Publish(ctx, agent.TokenBatch{StreamID: streamID, First: live.Events[0].Index, Events: live.Events})
	case live.Wake:
		err = a.events.Wake(ctx, streamID)
	default:
		return
	}
	if err != nil {
		a.logger.Debug("publish the turn's events", zap.String("stream_id", streamID), zap.Error(err))
	}
}

func (a *Activities) wake(ctx context.Context, streamID string) {
	if a.events == nil || streamID == "" {
		return
	}
	if err := a.events.Wake(ctx, streamID); err != nil {
		a.logger.Debug("wake stream", zap.String("stream_id", streamID), zap.Error(err))
	}
}

// turnLink is a streaming call's way to its turn: send a batch, read the
// head of the turn's event log.
type turnLink interface {
	send(ctx context.Context, b agent.TokenBatch, notify string) error
	head(ctx context.Context, streamID string) (int64, error)
}

// temporalLink reaches the turn through Temporal: a batch is a signal to
// the turn, then goes to the live path and the notify workflow; the head
// is read with the turn's events query.
type temporalLink struct{ a *Activities }

func (a *Activities) turnLink() turnLink { return temporalLink{a} }

func (l temporalLink) send(ctx context.Context, b agent.TokenBatch, notify string) error {
	a := l.a
	if err := l.signal(ctx, b); err != nil {
		return fmt.Errorf("send token batch to %q: %w", b.StreamID, err)
	}
	if a.events != nil {
		if err := a.events.Publish(ctx, b); err != nil {
			// Gateways fall back to reading the log.
			a.logger.Debug("publish token batch", zap.String("stream_id", b.StreamID), zap.Error(err))
		}
	}
	if notify != "" {
		if err := a.temporal.SignalWorkflow(ctx, notify, "", contract.SignalNotifyTokens, b); err != nil {
			// The caller's loss, not the turn's: its own result still arrives.
			a.log(ctx).Warn("notify token batch", zap.String("notify", notify), zap.Error(err))
		} else {
			// A delegating turn's log now holds the batch as child
			// events: its followers read it (a process workflow has none).
			a.wake(ctx, notify)
		}
	}
	return nil
}

// signal sends a batch to its turn. A loaded server that does not answer
// in time is asked again, for as long as the call lasts: a batch that got
// through the first time is refused by the turn the second (its indices
// are taken), so the repeat is harmless. A turn that is gone is not asked
// again.
func (l temporalLink) signal(ctx context.Context, b agent.TokenBatch) error {
	wait := 100 * time.Millisecond
	for {
		err := l.a.temporal.SignalWorkflow(ctx, b.StreamID, "", contract.SignalTokens, b)
		var notFound *serviceerror.NotFound
		if err == nil || errors.As(err, &notFound) || ctx.Err() != nil {
			return err
		}
		l.a.log(ctx).Warn("token batch not delivered; sending it again", zap.String("stream_id", b.StreamID), zap.Duration("wait", wait), zap.Error(err))
		// Still alive, and nothing past the batch before this one sent.
		activity.RecordHeartbeat(ctx, b.First-1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

func (l temporalLink) head(ctx context.Context, streamID string) (int64, error) {
	page, err := turnclient.Events(ctx, l.a.temporal, streamID, agent.EventsQuery{HeadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("read the head of stream %q: %w", streamID, err)
	}
	return page.Next, nil
}

// streamer batches a model call's text into token events and sends each
// batch to the turn. The first text goes out at once, for a fast first
// token; after that a batch leaves every interval, or sooner when it
// reaches maxBytes, and never while the previous one is still being sent —
// so a slow server gets fewer, larger batches instead of a queue. It
// heartbeats the last index sent every second.
type streamer struct {
	link     turnLink
	interval time.Duration
	maxBytes int
	streamID string
	notify   string
	step     int
	attempt  int

	mu      sync.Mutex
	buf     strings.Builder
	pending []agent.Event // events to send before the text (RETRYING)
	next    int64         // index of the next event
	err     error
	// keepTail: at the stop, what is buffered stays for closeTail.
	keepTail bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// startStreamer starts the sender for one attempt of a call. On a retried
// attempt it first fences off what earlier attempts streamed: the log's
// head is read from the turn (the authority: an earlier attempt may have
// died between a signal and its heartbeat), and a RETRYING event voids the
// indices from the call's first on.
func (a *Activities) startStreamer(ctx context.Context, in contract.CallModelInput, attempt int, link turnLink) (*streamer, error) {
	s := &streamer{
		link: link, interval: a.streamInterval, maxBytes: a.streamMaxBytes,
		streamID: in.StreamID, notify: in.Notify, step: in.Seq, attempt: attempt,
		next: in.FirstIndex,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if attempt > 1 {
		head, err := link.head(ctx, in.StreamID)
		if err != nil {
			return nil, err
		}
		if head > in.FirstIndex {
			s.next = head
			s.pending = append(s.pending, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying,
				VoidFrom: in.FirstIndex, Attempt: attempt, Step: in.Seq})
		}
	}
	a.publishLive(ctx, in.StreamID, in.Live)
	go s.run(ctx)
	if len(s.pending) > 0 {
		s.poke()
	}
	return s, nil
}

// add is the model's OnText: it never blocks on the network.
func (s *streamer) add(_ context.Context, text string) error {
	s.mu.Lock()
	s.buf.WriteString(text)
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return err // stop the model call: the turn cannot take more text
	}
	s.poke()
	return nil
}

func (s *streamer) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// close sends what is left and waits; it returns the first send error.
func (s *streamer) close() error {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// closeTail stops like close but does not send what is buffered: it is
// returned as the call's last batch (false when there is none), for the
// call's result.
func (s *streamer) closeTail() (agent.TokenBatch, bool, error) {
	s.mu.Lock()
	s.keepTail = true
	s.mu.Unlock()
	if err := s.close(); err != nil {
		return agent.TokenBatch{}, false, err
	}
	b, ok := s.take()
	return b, ok, nil
}

// finish sends what is buffered at the stop, unless closeTail keeps it.
func (s *streamer) finish(ctx context.Context) {
	s.mu.Lock()
	keep := s.keepTail
	s.mu.Unlock()
	if !keep {
		s.flush(ctx)
	}
}

// abort stops without sending what is buffered: the attempt failed and its
// text will be voided by the next attempt.
func (s *streamer) abort() {
	s.mu.Lock()
	s.buf.Reset()
	s.pending = nil
	s.mu.Unlock()
	_ = s.close()
}

// run sends batches until close or the end of the call's context.
func (s *streamer) run(ctx context.Context) {
	defer close(s.done)
	heartbeat := time.NewTicker(time.Second)
	defer heartbeat.Stop()
	var last time.Time // zero: the first batch leaves at once
	for {
		select {
		case <-s.kick:
		case <-heartbeat.C:
			activity.RecordHeartbeat(ctx, s.lastIndex())
			continue
		case <-s.stop:
			s.finish(ctx)
			return
		case <-ctx.Done():
			return
		}
		switch s.wait(ctx, last) {
		case waitStopped:
			s.finish(ctx)
			return
		case waitCanceled:
			return
		}
		if !s.flush(ctx) {
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
// the batch fills up first.
func (s *streamer) wait(ctx context.Context, last time.Time) waitOutcome {
	for {
		d := s.interval - time.Since(last)
		if d <= 0 || s.size() >= s.maxBytes {
			return waitDue
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return waitDue
		case <-s.kick:
			t.Stop()
		case <-s.stop:
			t.Stop()
			return waitStopped
		case <-ctx.Done():
			t.Stop()
			return waitCanceled
		}
	}
}

func (s *streamer) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

func (s *streamer) lastIndex() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next - 1
}

// take moves the buffered events into a batch; false when there are none.
func (s *streamer) take() (agent.TokenBatch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	events := s.pending
	s.pending = nil
	if s.buf.Len() > 0 {
		events = append(events, agent.Event{Kind: agent.EventToken, Text: s.buf.String(), Step: s.step, Attempt: s.attempt})
		s.buf.Reset()
	}
	if len(events) == 0 {
		return agent.TokenBatch{}, false
	}
	b := agent.TokenBatch{StreamID: s.streamID, Step: s.step, Attempt: s.attempt, First: s.next, Events: events}
	for i := range events {
		events[i].StreamID = s.streamID
		events[i].Index = s.next + int64(i)
	}
	return b, true
}

// flush sends the buffered events as one batch; false after a failure.
func (s *streamer) flush(ctx context.Context) bool {
	s.mu.Lock()
	failed := s.err != nil
	s.mu.Unlock()
	if failed {
		return false
	}
	b, ok := s.take()
	if !ok {
		return true
	}
	if err := s.link.send(ctx, b, s.notify); err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		return false
	}
	last := b.First + int64(len(b.Events)) - 1
	s.mu.Lock()
	s.next = last + 1
	s.mu.Unlock()
	// No heartbeat here: the ticker's carries the last index, and a short
	// call is spared the server round trip of a heartbeat of its own.
	return true
}
