package eventlog

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// DefaultIdleRead is how long a follower waits without news before it
// reads the log anyway: with a live path, a lost notification costs at
// most this much delay.
const DefaultIdleRead = 2 * time.Second

// LiveSource is the receiving end of the live path (pglive.Hub): what
// activities published of each stream, fanned out to its subscribers.
type LiveSource interface {
	// Subscribe starts receiving streamID's live messages.
	Subscribe(streamID string) Subscription
	// Stored returns the events after index after that model calls in
	// flight have streamed live first (Appender): shown to followers, not
	// yet in the log.
	Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error)
}

// Subscription receives one stream's live messages, in the order they
// were published; Close it when done.
type Subscription interface {
	// Events carries batches of live events (none: a wake-up, the log has
	// news).
	Events() <-chan []agent.Event
	// Lagged is signalled when messages may have been lost (a full
	// buffer, the listener reconnecting, or not yet up): read the log.
	Lagged() <-chan struct{}
	Close()
}

// ReadCounter counts a follower's reads of the log, by reason: start,
// gap, idle or close (pglive.Metrics).
type ReadCounter interface {
	LogRead(reason string)
}

// Follower follows turns' event logs for clients: the reader side.
type Follower struct {
	client   client.Client
	hub      LiveSource // nil: read the log only
	logger   log.Logger
	idleRead time.Duration
	// Metrics counts log reads; nil counts nothing.
	Metrics ReadCounter
	// reads shares one query among the followers that read the same log
	// from the same index at the same moment: a hundred viewers opening a
	// turn at once cost Temporal one query, not a hundred.
	mu    sync.Mutex
	reads map[string]*sharedRead
}

// sharedRead is a read of the log that followers wait for; it is
// cancelled when the last of them stops waiting (a follower reads beside
// its live path, and may be gone before its read ends).
type sharedRead struct {
	done    chan struct{}
	page    agent.EventsPage
	err     error
	cancel  context.CancelFunc
	waiters int
}

// NewFollower returns a Follower. With a nil hub it only reads the log,
// every idleRead (0 means DefaultIdleRead): that is the polling design
// the live path is measured against.
func NewFollower(c client.Client, hub LiveSource, logger log.Logger, idleRead time.Duration) *Follower {
	idleRead = agent.OrDefault(idleRead, DefaultIdleRead)
	return &Follower{client: c, hub: hub, logger: logger, idleRead: idleRead, reads: map[string]*sharedRead{}}
}

// Follow calls send with every event of streamID after index after, in
// order and without gaps, until the terminal event has been sent (then it
// returns nil), ctx ends or send fails. A stream that does not exist is a
// CodeNotFound error; an after beyond the log's end is CodeInvalid.
func (f *Follower) Follow(ctx context.Context, streamID string, after int64, send func(agent.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var sub Subscription
	if f.hub != nil {
		// Subscribe before the first read: nothing falls between the two.
		sub = f.hub.Subscribe(streamID)
		defer sub.Close()
	}

	page, joined, err := f.readOrJoin(ctx, streamID, after, sub != nil)
	if err != nil {
		return err
	}
	if joined != nil {
		// Joining a turn whose live path holds what comes after the
		// client's position: read there, not the log, whose query waits
		// while a local model call holds the turn's workflow task.
		fl := &following{f: f, streamID: streamID, next: after + 1, send: send, held: map[int64]agent.Event{}}
		if done, err := fl.deliver(joined); done || err != nil {
			return err
		}
		return fl.wait(ctx, sub)
	}
	fl := &following{f: f, streamID: streamID, next: page.Next, send: send, held: map[int64]agent.Event{}}
	// A model call in flight may have shown the client events past the
	// log's end: the stream ends where they do.
	var stored []agent.Event
	if after >= page.Next && !page.Done {
		if stored, err = fl.readStored(ctx); err != nil {
			return err
		}
	}
	end := page.Next
	if len(stored) > 0 {
		end = stored[len(stored)-1].Index + 1
	}
	if err := agent.ValidateAfter(after, end); err != nil {
		return err
	}
	fl.next = after + 1
	if done, err := fl.deliver(page.Events); done || err != nil {
		return err
	}
	if stored != nil {
		if done, err := fl.deliver(stored); done || err != nil {
			return err
		}
	} else if done, err := fl.stored(ctx); done || err != nil {
		return err
	}
	return fl.wait(ctx, sub)
}

// joinPoll is how often a follower that joins a turn looks at the live
// path while its read of the log waits.
const joinPoll = 50 * time.Millisecond

// readOrJoin reads the log after index after, or, with a live path,
// returns what the live path holds from after+1 on (joined) as soon as it
// does, whichever comes first; only a read that is used counts. A turn
// whose model call runs as a local activity answers the log's query only
// when its workflow task ends — for a short turn, its end — while the
// call stores on the live path, at its start, the turn's own events
// before it, then what it streams.
func (f *Follower) readOrJoin(ctx context.Context, streamID string, after int64, live bool) (agent.EventsPage, []agent.Event, error) {
	if !live {
		f.count("start")
		page, err := f.read(ctx, streamID, after)
		return page, nil, err
	}
	stored := func() []agent.Event {
		evs, err := f.hub.Stored(ctx, streamID, after)
		if err != nil {
			if ctx.Err() == nil {
				f.logger.Warn("reading stored stream events failed", "stream_id", streamID, "error", err)
			}
			return nil
		}
		if len(evs) > 0 && evs[0].Index == after+1 {
			return evs
		}
		return nil
	}
	if evs := stored(); evs != nil {
		return agent.EventsPage{}, evs, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type read struct {
		page agent.EventsPage
		err  error
	}
	reads := make(chan read, 1)
	go func() {
		page, err := f.read(rctx, streamID, after)
		reads <- read{page, err}
	}()
	tick := time.NewTicker(joinPoll)
	defer tick.Stop()
	for {
		select {
		case r := <-reads:
			f.count("start")
			return r.page, nil, r.err
		case <-tick.C:
			if evs := stored(); evs != nil {
				return agent.EventsPage{}, evs, nil
			}
		}
	}
}

// FollowNew follows a stream that start starts: like Follow from the
// beginning, but subscribed before the start, so that with the live path
// whole nothing needs reading from the log until the turn has closed —
// the first event live is the log's first. An event that arrives after a
// gap (the start found a running turn of the same job, or a notification
// was lost) makes it read the log, as Follow does.
//
// start returns the id of the run it started or found.
func (f *Follower) FollowNew(ctx context.Context, streamID string, start func() (string, error), send func(agent.Event) error) error {
	if f.hub == nil {
		if _, err := start(); err != nil {
			return err
		}
		return f.Follow(ctx, streamID, 0, send)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := f.hub.Subscribe(streamID)
	defer sub.Close()
	runID, err := start()
	if err != nil {
		return err
	}
	fl := &following{f: f, streamID: streamID, runID: runID, next: 1, send: send, held: map[int64]agent.Event{}}
	return fl.wait(ctx, sub)
}

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
	reading chan logRead
}

// logRead is a read of the log, as it ended.
type logRead struct {
	page agent.EventsPage
	err  error
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
	ch, after := make(chan logRead, 1), fl.next-1
	go func() {
		page, err := fl.f.read(ctx, fl.streamID, after)
		ch <- logRead{page, err}
	}()
	fl.reading = ch
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
	p, err := fl.f.read(ctx, fl.streamID, fl.next-1)
	if err != nil {
		return false, err
	}
	if done, err := fl.deliver(p.Events); done || err != nil {
		return done, err
	}
	// A page may end before the log does: a page of an earlier run of a
	// turn that continued as new ends where that run's events do. Read on
	// while pages bring events.
	for len(p.Events) > 0 && fl.next < p.Next {
		if p, err = fl.f.read(ctx, fl.streamID, fl.next-1); err != nil {
			return false, err
		}
		if done, err := fl.deliver(p.Events); done || err != nil {
			return done, err
		}
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

// count counts a read of the log.
func (f *Follower) count(reason string) {
	if f.Metrics != nil {
		f.Metrics.LogRead(reason)
	}
}

// readRetryFor bounds how long a follower reads a log again after failed
// reads before it gives the client the error. Generous: the turn is
// durable, and a server saturated by a burst of turns (a thousand ending
// at once, each log read a task on a worker) answers late, not never.
const readRetryFor = 2 * time.Minute

// read returns the log's events after index after. A read the server
// fails (a loaded or restarting Temporal) is made again, with backoff, for
// up to readRetryFor: the client's stream waits instead of breaking. A
// turn that runs as another tenant than its id names is not the caller's:
// it is not found.
func (f *Follower) read(ctx context.Context, streamID string, after int64) (agent.EventsPage, error) {
	// The shared read is not any one caller's: it runs (bounded by
	// readRetryFor) while a caller waits for it, and each caller waits for
	// it or for its own context. The page's events are only read by the
	// followers.
	key := streamID + "\x00" + strconv.FormatInt(after, 10)
	f.mu.Lock()
	r := f.reads[key]
	if r == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readRetryFor+10*time.Second)
		r = &sharedRead{done: make(chan struct{}), cancel: cancel}
		f.reads[key] = r
		go func() {
			defer cancel()
			r.page, r.err = f.readOnce(rctx, streamID, after)
			f.forget(key, r)
			close(r.done)
		}()
	}
	r.waiters++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.waiters--; r.waiters == 0 {
			// No one waits: a later caller starts a read of its own.
			r.cancel()
			if f.reads[key] == r {
				delete(f.reads, key)
			}
		}
	}()
	select {
	case <-ctx.Done():
		return agent.EventsPage{}, ctx.Err()
	case <-r.done:
		return r.page, r.err
	}
}

// forget drops a shared read that has ended.
func (f *Follower) forget(key string, r *sharedRead) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads[key] == r {
		delete(f.reads, key)
	}
}

// readOnce is read for one caller.
func (f *Follower) readOnce(ctx context.Context, streamID string, after int64) (agent.EventsPage, error) {
	var page agent.EventsPage
	var err error
	wait, deadline := 50*time.Millisecond, time.Now().Add(readRetryFor)
	for {
		page, err = turnclient.Events(ctx, f.client, streamID, agent.EventsQuery{AfterIndex: after})
		if err == nil || !agent.IsCode(err, agent.CodeUnavailable) || time.Now().Add(wait).After(deadline) {
			break
		}
		if ctx.Err() != nil {
			// No one waits any more (read): nothing to say.
			return page, ctx.Err()
		}
		f.logger.Warn("stream read failed; reading again", "stream_id", streamID, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return page, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
	if err != nil {
		return page, err
	}
	if tenant, err := agent.StreamTenant(streamID); err == nil && page.TenantID != "" && page.TenantID != tenant {
		return agent.EventsPage{}, agent.Errorf(agent.CodeNotFound, "stream %q not found", streamID)
	}
	return page, nil
}
