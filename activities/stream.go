package activities

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
)

// Names shared with the workflows package, which imports this one.
const (
	signalTokens       = "tokens"
	queryEvents        = "events"
	signalNotifyTokens = "agent_tokens"
)

// EventPublisher is the low-latency path of stream events to gateways. A
// batch is published only after the turn has accepted it as a signal, so
// the live path never shows what the log will not hold. Wake says that a
// stream has new events that only its log holds.
type EventPublisher interface {
	Publish(ctx context.Context, b agent.TokenBatch) error
	Wake(ctx context.Context, streamID string) error
}

// Stream batching defaults; see Activities.StreamInterval.
const (
	DefaultStreamInterval = 200 * time.Millisecond
	DefaultStreamMaxBytes = 2048
)

func (a *Activities) streamInterval() time.Duration {
	if a.StreamInterval > 0 {
		return a.StreamInterval
	}
	return DefaultStreamInterval
}

func (a *Activities) streamMaxBytes() int {
	if a.StreamMaxBytes > 0 {
		return a.StreamMaxBytes
	}
	return DefaultStreamMaxBytes
}

func (a *Activities) wake(ctx context.Context, streamID string) {
	if a.Events == nil || streamID == "" {
		return
	}
	if err := a.Events.Wake(ctx, streamID); err != nil {
		a.Logger.Debug("wake stream", zap.String("stream_id", streamID), zap.Error(err))
	}
}

// streamer batches a model call's text into token events and sends each
// batch to the turn (signal), then to the live path and the notify
// workflow. The first text goes out at once, for a fast first token; after
// that a batch leaves every interval, or sooner when it reaches maxBytes,
// and never while the previous one is still being sent — so a slow server
// gets fewer, larger batches instead of a queue.
type streamer struct {
	a        *Activities
	ctx      context.Context
	streamID string
	notify   string
	step     int
	attempt  int

	mu      sync.Mutex
	buf     strings.Builder
	pending []agent.Event // events to send before the text (RETRYING)
	next    int64         // index of the next event
	err     error

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// startStreamer starts the sender. On a retried attempt it first fences
// off what earlier attempts streamed: the log's head is read from the turn
// (the authority: an earlier attempt may have died between a signal and
// its heartbeat), and a RETRYING event voids the indices from first on.
func (a *Activities) startStreamer(ctx context.Context, in CallModelInput) (*streamer, error) {
	info := activity.GetInfo(ctx)
	s := &streamer{
		a: a, ctx: ctx, streamID: in.StreamID, notify: in.Notify, step: in.Seq, attempt: int(info.Attempt),
		next: in.FirstIndex,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.attempt > 1 {
		head, err := a.streamHead(ctx, in.StreamID)
		if err != nil {
			return nil, err
		}
		if head > in.FirstIndex {
			s.next = head
			s.pending = append(s.pending, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying,
				VoidFrom: in.FirstIndex, Attempt: s.attempt, Step: in.Seq})
		}
	}
	a.wake(ctx, in.StreamID)
	go s.run()
	if len(s.pending) > 0 {
		s.poke()
	}
	return s, nil
}

func (a *Activities) streamHead(ctx context.Context, streamID string) (int64, error) {
	resp, err := a.Temporal.QueryWorkflow(ctx, streamID, "", queryEvents, agent.EventsQuery{HeadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("read the head of stream %q: %w", streamID, err)
	}
	var page agent.EventsPage
	if err := resp.Get(&page); err != nil {
		return 0, fmt.Errorf("decode the head of stream %q: %w", streamID, err)
	}
	return page.Next, nil
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

// abort stops without sending what is buffered: the attempt failed and its
// text will be voided by the next attempt.
func (s *streamer) abort() {
	s.mu.Lock()
	s.buf.Reset()
	s.pending = nil
	s.mu.Unlock()
	_ = s.close()
}

func (s *streamer) run() {
	defer close(s.done)
	interval := s.a.streamInterval()
	maxBytes := s.a.streamMaxBytes()
	heartbeat := time.NewTicker(time.Second)
	defer heartbeat.Stop()
	var last time.Time // zero: the first batch leaves at once
	for {
		select {
		case <-s.kick:
		case <-heartbeat.C:
			activity.RecordHeartbeat(s.ctx, s.lastIndex())
			continue
		case <-s.stop:
			s.flush()
			return
		case <-s.ctx.Done():
			return
		}
		// Wait for the interval to pass, unless the batch is full.
	wait:
		for {
			d := interval - time.Since(last)
			if d <= 0 || s.size() >= maxBytes {
				break
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
				break wait
			case <-s.kick:
				t.Stop()
			case <-s.stop:
				t.Stop()
				s.flush()
				return
			case <-s.ctx.Done():
				t.Stop()
				return
			}
		}
		if !s.flush() {
			return
		}
		last = time.Now()
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

// flush sends the buffered events as one batch; false after a failure.
func (s *streamer) flush() bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	events := s.pending
	s.pending = nil
	if s.buf.Len() > 0 {
		events = append(events, agent.Event{Kind: agent.EventToken, Text: s.buf.String(), Step: s.step, Attempt: s.attempt})
		s.buf.Reset()
	}
	if len(events) == 0 {
		s.mu.Unlock()
		return true
	}
	b := agent.TokenBatch{StreamID: s.streamID, Step: s.step, Attempt: s.attempt, First: s.next}
	for i := range events {
		events[i].StreamID = s.streamID
		events[i].Index = s.next + int64(i)
	}
	b.Events = events
	s.mu.Unlock()

	if err := s.a.Temporal.SignalWorkflow(s.ctx, s.streamID, "", signalTokens, b); err != nil {
		s.mu.Lock()
		s.err = fmt.Errorf("send token batch to %q: %w", s.streamID, err)
		s.mu.Unlock()
		return false
	}
	s.mu.Lock()
	s.next += int64(len(events))
	s.mu.Unlock()
	activity.RecordHeartbeat(s.ctx, b.First+int64(len(events))-1)

	if s.a.Events != nil {
		if err := s.a.Events.Publish(s.ctx, b); err != nil {
			// Gateways fall back to reading the log.
			s.a.Logger.Debug("publish token batch", zap.String("stream_id", s.streamID), zap.Error(err))
		}
	}
	if s.notify != "" {
		if err := s.a.Temporal.SignalWorkflow(s.ctx, s.notify, "", signalNotifyTokens, b); err != nil {
			// The caller's loss, not the turn's: its own result still arrives.
			s.a.Logger.Warn("notify token batch", zap.String("notify", s.notify), zap.Error(err))
		}
	}
	return true
}
