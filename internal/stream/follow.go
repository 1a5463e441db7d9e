package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
)

// Names of the turn workflow's query (kept in step with workflows, which
// this package must not import).
const queryEvents = "events"

// DefaultIdleRead is how long a follower waits without news before it
// reads the log anyway: with a live path, a lost notification costs at
// most this much delay.
const DefaultIdleRead = 2 * time.Second

// Follower follows turns' event logs for clients.
type Follower struct {
	client   client.Client
	hub      *Hub // nil: read the log only
	logger   *zap.Logger
	idleRead time.Duration
}

// NewFollower returns a Follower. With a nil hub it only reads the log,
// every idleRead (0 means DefaultIdleRead): that is the polling design
// the live path is measured against.
func NewFollower(c client.Client, hub *Hub, logger *zap.Logger, idleRead time.Duration) *Follower {
	if idleRead <= 0 {
		idleRead = DefaultIdleRead
	}
	return &Follower{client: c, hub: hub, logger: logger, idleRead: idleRead}
}

// Follow calls send with every event of streamID after index after, in
// order and without gaps, until the terminal event has been sent (then it
// returns nil), ctx ends or send fails. A stream that does not exist is a
// CodeNotFound error; an after beyond the log's end is CodeInvalid.
func (f *Follower) Follow(ctx context.Context, streamID string, after int64, send func(agent.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var sub *Subscription
	if f.hub != nil {
		// Subscribe before the first read: nothing falls between the two.
		sub = f.hub.Subscribe(streamID)
		defer sub.Close()
	}

	page, err := f.read(ctx, streamID, after)
	if err != nil {
		return err
	}
	if err := agent.ValidateAfter(after, page.Next); err != nil {
		return err
	}
	next := after + 1
	deliver := func(evs []agent.Event) (bool, error) {
		for _, e := range evs {
			if e.Index != next {
				continue // already sent, or not yet in order
			}
			if err := send(e); err != nil {
				return false, err
			}
			next++
			if e.Terminal() {
				return true, nil
			}
		}
		return false, nil
	}
	if done, err := deliver(page.Events); done || err != nil {
		return err
	}

	// The turn's completion: a last read of the log ends every follower,
	// whatever happened to the live path.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = f.client.GetWorkflow(ctx, streamID, "").Get(ctx, nil)
	}()

	var live <-chan []agent.Event
	var lagged <-chan struct{}
	if sub != nil {
		live, lagged = sub.C, sub.Lagged
	}
	held := map[int64]agent.Event{} // live events that arrived ahead of a gap
	idle := time.NewTimer(f.idleRead)
	defer idle.Stop()
	catchUp := func() (bool, error) {
		p, err := f.read(ctx, streamID, next-1)
		if err != nil {
			return false, err
		}
		done, err := deliver(p.Events)
		if done || err != nil {
			return done, err
		}
		for i := range held {
			if i < next {
				delete(held, i)
			}
		}
		return f.drainHeld(held, &next, send)
	}
	for {
		var done bool
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case evs := <-live:
			if len(evs) == 0 || evs[0].Index > next {
				// A wake-up, or a batch after events only the log holds.
				for _, e := range evs {
					held[e.Index] = e
				}
				done, err = catchUp()
			} else {
				if done, err = deliver(evs); !done && err == nil {
					done, err = f.drainHeld(held, &next, send)
				}
			}
		case <-lagged:
			done, err = catchUp()
		case <-idle.C:
			done, err = catchUp()
		case <-closed:
			closed = nil
			done, err = catchUp()
			if err == nil && !done {
				// The workflow ended without a terminal event (terminated,
				// timed out by the server): say so instead of waiting.
				return agent.Errorf(agent.CodeUnavailable, "stream %q ended without a final status", streamID)
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
		idle.Reset(f.idleRead)
	}
}

func (f *Follower) drainHeld(held map[int64]agent.Event, next *int64, send func(agent.Event) error) (bool, error) {
	for {
		e, ok := held[*next]
		if !ok {
			return false, nil
		}
		delete(held, *next)
		if err := send(e); err != nil {
			return false, err
		}
		*next++
		if e.Terminal() {
			return true, nil
		}
	}
}

// read returns the log's events after index after.
func (f *Follower) read(ctx context.Context, streamID string, after int64) (agent.EventsPage, error) {
	resp, err := f.client.QueryWorkflow(ctx, streamID, "", queryEvents, agent.EventsQuery{AfterIndex: after})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return agent.EventsPage{}, agent.Errorf(agent.CodeNotFound, "stream %q not found", streamID)
		}
		if ctx.Err() != nil {
			return agent.EventsPage{}, ctx.Err()
		}
		return agent.EventsPage{}, agent.Errorf(agent.CodeUnavailable, "read stream %q: %v", streamID, err)
	}
	var page agent.EventsPage
	if err := resp.Get(&page); err != nil {
		return agent.EventsPage{}, fmt.Errorf("decode stream %q: %w", streamID, err)
	}
	return page, nil
}
