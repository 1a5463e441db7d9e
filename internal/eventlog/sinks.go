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
// path never shows what the log will not hold (a signalled call's
// batches, which the turn may refuse, go through Fencer). Wake says that
// a stream has new events that only its log holds.
type Publisher interface {
	Publish(ctx context.Context, b agent.TokenBatch) error
	Wake(ctx context.Context, streamID string) error
}

// ErrFenced is what an Appender says to an attempt of a model call that a
// newer attempt, or a later call, has fenced off its stream: it must stop
// streaming.
var ErrFenced = errors.New("a newer model call owns the stream")

// ErrNotTaken is what a retried attempt of a signalled model call is told
// when the turn did not take its first batch: an earlier attempt that
// still runs got a batch in at the log's head first. It must stop: its
// batches would all be refused, and the next attempt reads the head again.
var ErrNotTaken = errors.New("the turn took another attempt's batch at the log's head")

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
	// attempt or call has claimed the stream. held says the attempt holds
	// the stream already (it claimed it, or appended before): the batch
	// is then stored only while the stream's fence is still the attempt's
	// own, never after the turn forgot the stream (Forget drops the fence
	// with the batches, and a call the turn sealed may still run until
	// its next heartbeat).
	Append(ctx context.Context, b agent.TokenBatch, held bool) error
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

// Fencer fences the batches of a model call that signals them to its turn
// on the live path (pglive.Publisher), as Appender fences a live-first
// call's: a retried attempt fences the stream before it reads the log's
// head, and each batch is published fenced. The package doc says why
// (Steps, attempts and fencing).
type Fencer interface {
	// Fence makes attempt of step the stream's newest call: no earlier
	// attempt publishes after it. ErrFenced when a newer one has.
	Fence(ctx context.Context, streamID string, step, attempt int) error
	// PublishFenced publishes a batch of attempt b.Attempt of step
	// b.Step; ErrFenced, and nothing published, when a newer attempt or
	// a later call has fenced the stream.
	PublishFenced(ctx context.Context, b agent.TokenBatch) error
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
// path, fenced (Fencer), and the notify workflow. ErrFenced: a newer
// attempt or a later call has fenced the stream, and the call must stop;
// the batch goes no further (the turn refuses it, or took it before the
// newer attempt read the head, whose RETRYING voids it).
func (s Sinks) Send(ctx context.Context, b agent.TokenBatch) error {
	if err := s.signal(ctx, b); err != nil {
		return fmt.Errorf("send token batch to %q: %w", b.StreamID, err)
	}
	return s.passOn(ctx, b)
}

// SendFirst is Send for the first batch of a retried attempt: it goes on
// only once the turn's log shows the turn took it; ErrNotTaken when an
// earlier attempt got a batch in at that head first (see the package doc).
func (s Sinks) SendFirst(ctx context.Context, b agent.TokenBatch) error {
	if err := s.signal(ctx, b); err != nil {
		return fmt.Errorf("send token batch to %q: %w", b.StreamID, err)
	}
	took, err := s.took(ctx, b)
	if err != nil {
		return fmt.Errorf("read back token batch %d of %q: %w", b.First, b.StreamID, err)
	}
	if !took {
		return fmt.Errorf("batch %d of stream %q, step %d, attempt %d: %w", b.First, b.StreamID, b.Step, b.Attempt, ErrNotTaken)
	}
	return s.passOn(ctx, b)
}

// took reports whether the turn's log holds b's first event as b has it:
// the event at that index is of b's step and attempt, and of its kind.
func (s Sinks) took(ctx context.Context, b agent.TokenBatch) (bool, error) {
	page, err := turnclient.Events(ctx, s.Temporal, b.StreamID, agent.EventsQuery{AfterIndex: b.First - 1, Limit: 1})
	if err != nil || len(page.Events) == 0 {
		return false, err
	}
	got, want := page.Events[0], b.Events[0]
	return got.Index == b.First && got.Kind == want.Kind && got.Step == b.Step && got.Attempt == b.Attempt, nil
}

// passOn publishes a batch the turn has been sent, fenced when the live
// path fences (Fencer), and sends it to the notify workflow, whose log
// takes it as the turn's does.
func (s Sinks) passOn(ctx context.Context, b agent.TokenBatch) error {
	if err := s.publish(ctx, b); err != nil {
		return fmt.Errorf("publish token batch to %q: %w", b.StreamID, err)
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

// publish puts a batch of the call on the live path; only ErrFenced is
// returned. Any other failure costs followers only time: they read the
// log instead.
func (s Sinks) publish(ctx context.Context, b agent.TokenBatch) error {
	if s.Live == nil {
		return nil
	}
	var err error
	if f, ok := s.Live.(Fencer); ok {
		err = f.PublishFenced(ctx, b)
	} else {
		err = s.Live.Publish(ctx, b)
	}
	if errors.Is(err, ErrFenced) {
		return err
	}
	if err != nil {
		s.Logger.Debug("publish token batch", "stream_id", b.StreamID, "error", err)
	}
	return nil
}

// Fence fences the stream for a retried attempt of a signalled call
// before it reads the log's head (Fencer): an earlier attempt that still
// runs publishes nothing after it. ErrFenced: a newer attempt has fenced
// it. A live path that cannot say (Postgres away) fails nothing: the
// attempt's own batches fence it again as they are published.
func (s Sinks) Fence(ctx context.Context, streamID string, step, attempt int) error {
	f, ok := s.Live.(Fencer)
	if !ok || streamID == "" {
		return nil
	}
	err := f.Fence(ctx, streamID, step, attempt)
	if errors.Is(err, ErrFenced) {
		return err
	}
	if err != nil {
		s.Logger.Debug("fence stream", "stream_id", streamID, "error", err)
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
func (s Sinks) Append(ctx context.Context, b agent.TokenBatch, held bool) error {
	a, ok := s.Live.(Appender)
	if !ok {
		return fmt.Errorf("append token batch to %q: the live path stores nothing", b.StreamID)
	}
	if err := a.Append(ctx, b, held); err != nil {
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
