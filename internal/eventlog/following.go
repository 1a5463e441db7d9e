package eventlog

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// following is one client's position in one stream.
type following struct {
	f        *Follower
	streamID string
	runID    string // "": the stream's current run, looked up when it closes
	next     int64  // the index the client needs next
	send     func(agent.Event) error
	held     map[int64]agent.Event // live events that arrived ahead of a gap
	// reading brings the read of the log in flight (nil: none). A read
	// runs beside the live path, not in its way: a turn in a local model
	// call answers the log's query only at its workflow task's end or
	// heartbeat, while the call's events keep coming live — after a
	// killed worker, the retried call's whole answer.
	reading <-chan logRead
}

// logRead is a read of the log, as it ended.
type logRead struct {
	page agent.EventsPage
	err  error
}

// goRead runs read in a goroutine; its answer comes on the channel
// returned.
func goRead(read func() (agent.EventsPage, error)) <-chan logRead {
	ch := make(chan logRead, 1)
	go func() {
		page, err := read()
		ch <- logRead{page, err}
	}()
	return ch
}

// wait delivers what arrives next — live events, wake-ups, or what the
// log holds after an idle spell or the workflow's end — until the
// terminal event has been sent.
func (fl *following) wait(ctx context.Context, sub Subscription) error {
	// The turn's completion: a last read of the log ends every follower,
	// whatever happened to the live path.
	closed := make(chan struct{})
	var tail []agent.Event // what the close carries: read once closed is closed
	go func() {
		defer close(closed)
		tail = fl.awaitClose(ctx)
	}()

	var live <-chan []agent.Event
	var lagged <-chan struct{}
	if sub != nil {
		live, lagged = sub.Events(), sub.Lagged()
	}
	idle := time.NewTimer(fl.f.idleRead)
	defer idle.Stop()
	for {
		var done bool
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case evs := <-live:
			done, err = fl.live(ctx, evs)
		case <-lagged:
			done, err = fl.gap(ctx, "gap", true)
		case <-idle.C:
			done, err = fl.gap(ctx, "idle", true)
		case r := <-fl.reading:
			done, err = fl.read(ctx, r)
		case <-closed:
			closed = nil
			done, err = fl.ended(ctx, tail)
			if err == nil && !done {
				// The workflow ended without a terminal event (terminated,
				// timed out by the server): say so instead of waiting.
				return agent.Errorf(agent.CodeUnavailable, "stream %q ended without a final status", fl.streamID)
			}
		}
		if done || err != nil {
			return err
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(fl.f.idleRead)
	}
}

// awaitClose returns when the turn's workflow has closed, or ctx ends,
// with the end of its log that the workflow returned, if any
// (agent.TurnResult.StreamTail). A wait the server breaks off (a loaded
// or restarting Temporal) is not a close: it waits again.
func (fl *following) awaitClose(ctx context.Context) []agent.Event {
	wait := 100 * time.Millisecond
	for {
		var res struct {
			StreamTail []agent.Event `json:"stream_tail"`
		}
		err := fl.f.client.GetWorkflow(ctx, fl.streamID, fl.runID).Get(ctx, &res)
		if err == nil {
			return res.StreamTail
		}
		var ended *temporal.WorkflowExecutionError
		var notFound *serviceerror.NotFound
		if errors.As(err, &ended) || errors.As(err, &notFound) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// ended takes the close of the workflow: the tail it returned ends the
// stream when it continues it exactly through the terminal event;
// otherwise — no tail, or events missing before it — the log is read, as
// a closed workflow's log is final.
func (fl *following) ended(ctx context.Context, tail []agent.Event) (bool, error) {
	if len(tail) > 0 && tail[0].Index <= fl.next && tail[len(tail)-1].Terminal() && tail[len(tail)-1].Index >= fl.next {
		return fl.deliver(tail)
	}
	return fl.catchUp(ctx, "close")
}

// deliver sends the events that continue the stream; it reports true
// once the terminal event is sent.
func (fl *following) deliver(evs []agent.Event) (bool, error) {
	for _, e := range evs {
		if e.Index != fl.next {
			continue // already sent, or not yet in order
		}
		if err := fl.send(e); err != nil {
			return false, err
		}
		fl.next++
		if e.Terminal() {
			return true, nil
		}
	}
	return false, nil
}

// live takes a live batch: in order, it is sent; after a gap (or a
// wake-up, which has no events) the log fills the gap.
func (fl *following) live(ctx context.Context, evs []agent.Event) (bool, error) {
	if len(evs) == 0 || evs[0].Index > fl.next {
		for _, e := range evs {
			fl.held[e.Index] = e
		}
		// A wake-up says the log has news the live path does not carry.
		return fl.gap(ctx, "gap", len(evs) > 0)
	}
	if done, err := fl.deliver(evs); done || err != nil {
		return done, err
	}
	return fl.drainHeld()
}

// gap fills what the client may have missed — after live events that
// skipped some, a lagging subscription, a wake-up or a quiet spell — from
// the live path first when storedFirst, then from the log, read beside
// the live path (reading). A gap the live path fills reads no log; a
// quiet spell reads it anyway, for news only the log carries (a tool's
// progress whose wake-up was lost).
func (fl *following) gap(ctx context.Context, reason string, storedFirst bool) (bool, error) {
	if storedFirst {
		// What a lost notification skipped is on the live path, when it
		// holds what follows the client's position.
		evs, err := fl.readStored(ctx)
		if err != nil {
			return false, err
		}
		if len(evs) > 0 && evs[0].Index == fl.next {
			if done, err := fl.deliver(evs); done || err != nil {
				return done, err
			}
			fl.dropHeld()
			done, err := fl.drainHeld()
			if done || err != nil || (len(fl.held) == 0 && reason != "idle") {
				return done, err
			}
		}
	}
	fl.startRead(ctx, reason)
	return false, nil
}

// startRead starts a read of the log from the client's position unless
// one is in flight; reason counts it ("": a page after the first).
func (fl *following) startRead(ctx context.Context, reason string) {
	if fl.reading != nil {
		return
	}
	if reason != "" {
		fl.f.count(reason)
	}
	after := fl.next - 1
	fl.reading = goRead(func() (agent.EventsPage, error) { return fl.f.read(ctx, fl.streamID, after) })
}

// read takes a read of the log that ended: it sends what continues the
// stream (the live path may have sent some meanwhile), reads the next
// page while pages bring events, then what calls in flight streamed past
// the log's end, and the held events that now follow.
func (fl *following) read(ctx context.Context, r logRead) (bool, error) {
	fl.reading = nil
	if r.err != nil {
		return false, r.err
	}
	if done, err := fl.deliver(r.page.Events); done || err != nil {
		return done, err
	}
	// A page may end before the log does: a page of an earlier run of a
	// turn that continued as new ends where that run's events do.
	if len(r.page.Events) > 0 && fl.next < r.page.Next {
		fl.startRead(ctx, "")
		return false, nil
	}
	if done, err := fl.stored(ctx); done || err != nil {
		return done, err
	}
	fl.dropHeld()
	return fl.drainHeld()
}

// catchUp reads the log from the client's position and waits for it,
// then sends the held events that now follow: at the turn's close, when
// the log is final.
func (fl *following) catchUp(ctx context.Context, reason string) (bool, error) {
	fl.f.count(reason)
	// Read on while pages bring events: a page may end before the log
	// does (see read).
	for more := true; more; {
		p, err := fl.f.read(ctx, fl.streamID, fl.next-1)
		if err != nil {
			return false, err
		}
		if done, err := fl.deliver(p.Events); done || err != nil {
			return done, err
		}
		more = len(p.Events) > 0 && fl.next < p.Next
	}
	if done, err := fl.stored(ctx); done || err != nil {
		return done, err
	}
	fl.dropHeld()
	return fl.drainHeld()
}

// dropHeld forgets the held events already sent.
func (fl *following) dropHeld() {
	for i := range fl.held {
		if i < fl.next {
			delete(fl.held, i)
		}
	}
}

// stored sends what a model call in flight has streamed past the log's
// end (LiveSource.Stored). Its failure costs only time: the events reach
// the log with the call's end.
func (fl *following) stored(ctx context.Context) (bool, error) {
	evs, err := fl.readStored(ctx)
	if err != nil {
		return false, err
	}
	return fl.deliver(evs)
}

// readStored reads what model calls in flight streamed after the client's
// position (LiveSource.Stored); none without a live path, or when it
// cannot be read.
func (fl *following) readStored(ctx context.Context) ([]agent.Event, error) {
	if fl.f.hub == nil {
		return nil, nil
	}
	evs, err := fl.f.hub.Stored(ctx, fl.streamID, fl.next-1)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fl.f.logger.Warn("reading stored stream events failed", "stream_id", fl.streamID, "error", err)
		return nil, nil
	}
	return evs, nil
}

func (fl *following) drainHeld() (bool, error) {
	for {
		e, ok := fl.held[fl.next]
		if !ok {
			return false, nil
		}
		delete(fl.held, fl.next)
		if err := fl.send(e); err != nil {
			return false, err
		}
		fl.next++
		if e.Terminal() {
			return true, nil
		}
	}
}
