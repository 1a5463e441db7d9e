package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// Publisher is the sending end of the live path (pglive.Publisher). A
// batch is published only after the turn has accepted it, so the live
// path never shows what the log will not hold. Wake says that a stream
// has new events that only its log holds.
type Publisher interface {
	Publish(ctx context.Context, b agent.TokenBatch) error
	Wake(ctx context.Context, streamID string) error
}

// ErrFenced is what an Appender says to an attempt of a model call that a
// newer attempt, or a later call, has fenced off its stream: it must stop
// streaming.
var ErrFenced = errors.New("a newer model call owns the stream")

// ErrInterrupted is the cause of a model call's context ended by an
// interruption of its turn sent on the live path (pglive.Interrupt): the
// turn has been signalled why, and acts on it at its next workflow task.
var ErrInterrupted = errors.New("the turn interrupted its model call")

// Appender is the live path's store of model calls in flight
// (pglive.Publisher): a live-first call appends its batches there as they
// stream, instead of signalling each to the turn, and its result hands
// them all to the log at once. Appends are fenced per stream: once an
// attempt (or the turn, sealing a call that failed) has claimed the
// stream, no earlier attempt appends again, so what followers were shown
// is exactly what the claimer read and hands on to the log.
type Appender interface {
	// Append stores a batch and publishes it; ErrFenced when a newer
	// attempt or call has claimed the stream.
	Append(ctx context.Context, b agent.TokenBatch) error
	// Put stores the turn's own events handed to an activity and
	// publishes them, unfenced.
	Put(ctx context.Context, b agent.TokenBatch) error
	// Claim makes attempt of step the stream's newest call and returns
	// what was stored from index from on, contiguous from it.
	Claim(ctx context.Context, streamID string, step, attempt int, from int64) ([]agent.Event, error)
	// NextAttempt claims the stream for a new attempt of step, numbered
	// least or past every attempt of step that claimed it, and returns
	// its number: a call that runs again with the attempt number it ran
	// with (a local activity whose workflow task was lost) is told apart.
	NextAttempt(ctx context.Context, streamID string, step, least int) (int, error)
	// Stored returns what the stream's calls stored after index after,
	// claiming nothing.
	Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error)
	// Forget drops what was stored for the stream, once its log holds it.
	Forget(ctx context.Context, streamID string) error
}

// Sinks is the activity side's way to a turn's log, one per activity
// call: Temporal for the durable record (signals to the turn, the events
// query), and the live path when there is one.
type Sinks struct {
	// Temporal signals the turn and reads its log's head. Required.
	Temporal client.Client
	// Live publishes accepted events to followers; nil: none (they read
	// the log).
	Live Publisher
	// Notify is a workflow that also receives the call's batches
	// (contract.SignalNotifyTokens): a process workflow, or the turn's
	// parent turn. "": none.
	Notify string
	// Logger logs what did not reach a follower or the notify workflow;
	// those are not the call's failures. Required.
	Logger log.Logger
}

// Send sends a batch to its turn (contract.SignalTokens), then to the live
// path and the notify workflow.
func (s Sinks) Send(ctx context.Context, b agent.TokenBatch) error {
	if err := s.signal(ctx, b); err != nil {
		return fmt.Errorf("send token batch to %q: %w", b.StreamID, err)
	}
	if s.Live != nil {
		if err := s.Live.Publish(ctx, b); err != nil {
			// Followers fall back to reading the log.
			s.Logger.Debug("publish token batch", "stream_id", b.StreamID, "error", err)
		}
	}
	if s.Notify != "" {
		if err := s.Temporal.SignalWorkflow(ctx, s.Notify, "", contract.SignalNotifyTokens, b); err != nil {
			// The caller's loss, not the turn's: its own result still arrives.
			s.Logger.Warn("notify token batch", "notify", s.Notify, "error", err)
		} else {
			// A delegating turn's log now holds the batch as child
			// events: its followers read it (a process workflow has none).
			s.Wake(ctx, s.Notify)
		}
	}
	return nil
}

// signal sends a batch to its turn. A loaded server that does not answer
// in time is asked again, for as long as the call lasts: a batch that got
// through the first time is refused by the turn the second (its indices
// are taken), so the repeat is harmless. A turn that is gone is not asked
// again.
func (s Sinks) signal(ctx context.Context, b agent.TokenBatch) error {
	wait := 100 * time.Millisecond
	for {
		err := s.Temporal.SignalWorkflow(ctx, b.StreamID, "", contract.SignalTokens, b)
		var notFound *serviceerror.NotFound
		if err == nil || errors.As(err, &notFound) || ctx.Err() != nil {
			return err
		}
		s.Logger.Warn("token batch not delivered; sending it again", "stream_id", b.StreamID, "wait", wait, "error", err)
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

// Append appends a batch of a live-first call to the live path's store
// (Appender).
func (s Sinks) Append(ctx context.Context, b agent.TokenBatch) error {
	a, ok := s.Live.(Appender)
	if !ok {
		return fmt.Errorf("append token batch to %q: the live path stores nothing", b.StreamID)
	}
	if err := a.Append(ctx, b); err != nil {
		return fmt.Errorf("append token batch to %q: %w", b.StreamID, err)
	}
	return nil
}

// Claim claims the stream for an attempt of a live-first call (Appender).
func (s Sinks) Claim(ctx context.Context, streamID string, step, attempt int, from int64) ([]agent.Event, error) {
	a, ok := s.Live.(Appender)
	if !ok {
		return nil, fmt.Errorf("claim stream %q: the live path stores nothing", streamID)
	}
	return a.Claim(ctx, streamID, step, attempt, from)
}

// Stored returns what the stream's live-first calls stored after index
// after (Appender).
func (s Sinks) Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error) {
	a, ok := s.Live.(Appender)
	if !ok {
		return nil, fmt.Errorf("read stream %q: the live path stores nothing", streamID)
	}
	return a.Stored(ctx, streamID, after)
}

// NextAttempt claims the stream for a new attempt of a live-first call
// (Appender).
func (s Sinks) NextAttempt(ctx context.Context, streamID string, step, least int) (int, error) {
	a, ok := s.Live.(Appender)
	if !ok {
		return 0, fmt.Errorf("claim stream %q: the live path stores nothing", streamID)
	}
	return a.NextAttempt(ctx, streamID, step, least)
}

// Appends reports whether the live path stores what it carries
// (Appender): only then can a call stream live first.
func (s Sinks) Appends() bool {
	_, ok := s.Live.(Appender)
	return ok
}

// Head reads the index the turn's log gives its next event, with the
// events query.
func (s Sinks) Head(ctx context.Context, streamID string) (int64, error) {
	page, err := turnclient.Events(ctx, s.Temporal, streamID, agent.EventsQuery{HeadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("read the head of stream %q: %w", streamID, err)
	}
	return page.Next, nil
}

// HandOn publishes what the turn handed the activity: its events, or a
// wake-up.
func (s Sinks) HandOn(ctx context.Context, streamID string, live contract.Live) {
	if s.Live == nil || streamID == "" {
		return
	}
	var err error
	ap, stores := s.Live.(Appender)
	switch {
	case len(live.Events) > 0 && stores:
		// Stored too: a follower that joins mid-call reads them there.
		err = ap.Put(ctx, agent.TokenBatch{StreamID: streamID, First: live.Events[0].Index, Events: live.Events})
	case len(live.Events) > 0:
		err = s.Live.Publish(ctx, agent.TokenBatch{StreamID: streamID, First: live.Events[0].Index, Events: live.Events})
	case live.Wake:
		err = s.Live.Wake(ctx, streamID)
	default:
		return
	}
	if err != nil {
		s.Logger.Debug("publish the turn's events", "stream_id", streamID, "error", err)
	}
}

// Wake tells the followers of streamID to read its log.
func (s Sinks) Wake(ctx context.Context, streamID string) {
	if s.Live == nil || streamID == "" {
		return
	}
	if err := s.Live.Wake(ctx, streamID); err != nil {
		s.Logger.Debug("wake stream", "stream_id", streamID, "error", err)
	}
}

// Progress sends what a running tool call is doing to its turn
// (contract.SignalToolProgress), which logs it as a tool_progress event,
// then wakes the turn's followers.
func (s Sinks) Progress(ctx context.Context, turnID string, p agent.ToolProgress) error {
	if err := s.Temporal.SignalWorkflow(ctx, turnID, "", contract.SignalToolProgress, p); err != nil {
		return err
	}
	s.Wake(ctx, turnID)
	return nil
}

// Close publishes, once the turn's result is stored, what the turn handed
// SaveResult and the closing events it will log from index from
// (contract.SaveResultInput.CloseFrom), in one batch, and returns the
// closing events with their indices. Published only, not stored: the
// turn's log holds them once its workflow task completes, and the
// workflow's close carries them again (Log.Tail) for a follower that
// missed them. Too large for one notification (a hand-on that was a
// wake-up, a long answer), nothing is published and nil returned: they
// go with the close only, as a wake-up would make every follower read
// the log.
func (s Sinks) Close(ctx context.Context, streamID string, live contract.Live, from int64, res agent.TurnResult) []agent.Event {
	if s.Live == nil || streamID == "" || from <= 0 || live.Wake {
		return nil
	}
	closing := Closing(res)
	for i := range closing {
		closing[i].StreamID, closing[i].Index = streamID, from+int64(i)
	}
	evs := append(slices.Clone(live.Events), closing...)
	if liveBytes(evs) > MaxLiveBytes {
		return nil
	}
	if err := s.Live.Publish(ctx, agent.TokenBatch{StreamID: streamID, First: evs[0].Index, Events: evs}); err != nil {
		s.Logger.Debug("publish the turn's closing events", "stream_id", streamID, "error", err)
	}
	return closing
}
