package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/contract"
)

// A model call run as a local activity holds its turn's workflow task
// while it runs, and a worker lost meanwhile is noticed only when the
// task times out. A call that outlasts its input's HandOffAfterMs is
// therefore handed off: the local activity returns HandedOff while the
// call runs on in the worker, its stream untouched, and the turn starts
// an AwaitModel activity for its result. That activity, dispatched to the
// same worker (eager execution), takes the call over from the worker's
// handoffs and heartbeats while it waits: a lost worker is noticed within
// the activity's heartbeat timeout, not the task's. Run anywhere else, or
// again, it finds no call to take and calls the model afresh, as the
// step's attempts after the handed-off one.

// handedCall is a model call that runs on after its local activity
// returned.
type handedCall struct {
	done    chan struct{}
	attempt chan int // the step's attempt the call runs as, once numbered
	cancel  context.CancelFunc
	awaited int // the AwaitModel attempts waiting for it (handoffs.mu)
	res     contract.CallModelResult
	err     error
}

// handoffs are the calls handed off in this worker, by call.
type handoffs struct {
	mu    sync.Mutex
	calls map[string]*handedCall
	// reclaim is reclaimWithin, unless a test shortens it.
	reclaim time.Duration
}

// handOffKey names a step's call among a worker's handed-off ones.
func handOffKey(in contract.CallModelInput) string {
	return fmt.Sprintf("%s\x00%s\x00%d", in.TenantID, in.JobID, in.Seq)
}

// unclaimed is how long a handed-off call that has ended is kept for its
// AwaitModel: a turn whose task was lost after the hand-off never asks.
const unclaimed = 5 * time.Minute

func (h *handoffs) put(key string, c *handedCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]*handedCall{}
	}
	if old := h.calls[key]; old != nil {
		// The step's call was handed off before, by a task that was
		// then lost: no AwaitModel will take that one.
		old.cancel()
	}
	h.calls[key] = c
	go func() {
		<-c.done
		time.Sleep(unclaimed)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.calls[key] == c {
			delete(h.calls, key)
		}
	}()
}

// claim is the call handed off under key, now awaited by one more
// AwaitModel attempt; nil for none.
func (h *handoffs) claim(key string) *handedCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[key]
	if c != nil {
		c.awaited++
	}
	return c
}

// drop forgets c, once its result is taken or it is stopped.
func (h *handoffs) drop(key string, c *handedCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.awaited--
	if h.calls[key] == c {
		delete(h.calls, key)
	}
}

// reclaimWithin is how long a call an abandoned AwaitModel attempt
// leaves running waits for the attempt after it: the retry's first
// interval and some. A retry that went to another worker calls the model
// there, and this call is stopped.
const reclaimWithin = 10 * time.Second

// abandon leaves c running for the retry of an attempt Temporal gave up
// on; unclaimed by then, it is stopped and forgotten.
func (h *handoffs) abandon(key string, c *handedCall) {
	h.mu.Lock()
	c.awaited--
	h.mu.Unlock()
	time.AfterFunc(cmp.Or(h.reclaim, reclaimWithin), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.calls[key] == c && c.awaited == 0 {
			delete(h.calls, key)
			c.cancel()
		}
	})
}

// callHandingOff runs a local call that may hand off (HandOffAfterMs):
// under a context of its own, which the local activity's end does not
// cancel but its cancellation does while it waits, and the call's
// deadline bounds.
func (a *Activities) callHandingOff(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if d, ok := ctx.Deadline(); ok {
		var stop context.CancelFunc
		run, stop = context.WithDeadline(run, d)
		prev := cancel
		cancel = func() { stop(); prev() }
	}
	c := &handedCall{done: make(chan struct{}), attempt: make(chan int, 1), cancel: cancel}
	go func() {
		defer close(c.done)
		defer cancel()
		c.res, c.err = a.callWatched(run, in, c.attempt)
	}()
	timer := time.NewTimer(time.Duration(in.HandOffAfterMs) * time.Millisecond)
	defer timer.Stop()
	// Handed off once the time is up and the call numbered: AwaitModel,
	// should it call afresh, numbers its attempts after this one.
	var numbered <-chan int // nil, never ready, until the time is up
	for {
		select {
		case <-c.done:
			return c.res, c.err
		case <-ctx.Done():
			cancel()
			<-c.done
			return c.res, c.err
		case <-timer.C:
			numbered = c.attempt
		case n := <-numbered:
			a.handoffs.put(handOffKey(in), c)
			return contract.CallModelResult{HandedOff: true, Attempt: n}, nil
		}
	}
}

// AwaitModel takes over a model call its local activity handed off
// (CallModelResult.HandedOff) and returns its result, heartbeating while
// it waits; cancelled, it stops the call. A call this worker does not
// hold — the worker that ran it was lost, or an attempt before this one
// took its result, a failure — is made again, as the step's attempts
// after in.AttemptBase (the handed-off call's).
//
// An attempt the server gave up on (its heartbeat came late, on a loaded
// worker) leaves the call running for the attempt after it, which finds
// it here: the model is not asked twice for one step because a heartbeat
// was slow. A retry that goes elsewhere calls the model there, and the
// call left here is stopped (reclaimWithin).
func (a *Activities) AwaitModel(ctx context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
	in.HandOffAfterMs = 0
	key := handOffKey(in)
	c := a.handoffs.claim(key)
	if c == nil {
		return a.CallModel(ctx, in)
	}
	defer keepAlive(ctx, time.Second, nil)()
	select {
	case <-c.done:
		a.handoffs.drop(key, c)
		return c.res, c.err
	case <-ctx.Done():
		if abandoned(ctx) {
			a.handoffs.abandon(key, c)
			return contract.CallModelResult{}, ctx.Err()
		}
		a.handoffs.drop(key, c)
		c.cancel()
		<-c.done
		return contract.CallModelResult{}, ctx.Err()
	}
}

// abandoned reports whether an activity's context ended because the
// server no longer runs this attempt (it timed out, and is retried) rather
// than because it was cancelled: its heartbeat was answered "not found",
// or could not be sent for the whole heartbeat timeout.
func abandoned(ctx context.Context) bool {
	var notFound *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	var late *serviceerror.DeadlineExceeded
	cause := context.Cause(ctx)
	return errors.As(cause, &notFound) || errors.As(cause, &unavailable) || errors.As(cause, &late)
}
