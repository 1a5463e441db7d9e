package eventlog

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

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
	reads := goRead(func() (agent.EventsPage, error) { return f.read(rctx, streamID, after) })
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
