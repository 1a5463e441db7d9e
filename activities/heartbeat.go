package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// Heartbeats: a call run as an activity heartbeats from a ticker of its
// own, from its start to its end, so that a lost worker is noticed within
// its heartbeat timeout whatever the call is doing.

// keepAlive heartbeats details every interval until stop is called: for
// an activity whose work can outlast its heartbeat timeout in one piece
// (reading a page's documents: a PDF takes up to knowledge.PDFTimeout,
// and a process's first PDF waits for its reader to compile; a judge's
// model call), so that a lost worker is noticed within that timeout
// rather than the activity's whole start-to-close.
func keepAlive(ctx context.Context, every time.Duration, details any) (stop func()) {
	return ticking(ctx, every, func() { activity.RecordHeartbeat(ctx, details) })
}

// ticking calls beat every interval until stop is called or ctx ends.
func ticking(ctx context.Context, every time.Duration, beat func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// callHeartbeats heartbeats a tool call run as an activity every second,
// from its start to its end, whatever the call is doing (a database that
// is away, a far side that is slow): its heartbeat timeout is short
// (workflows' toolHeartbeat), so that a lost worker is noticed within
// seconds, and a live one must never miss it. A local activity runs
// inside its workflow task, which the SDK heartbeats: nothing to do.
func callHeartbeats(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	return keepAlive(ctx, time.Second, nil)
}

// keepAlive heartbeats a model call run as an activity every second, from
// its start to its end, whatever stage it is in (reading the turn's
// steps, a retry's read of its turn's log head, storing the reply): its
// heartbeat timeout is short (workflows' modelHeartbeat), so that a lost
// worker is noticed within seconds and the call retried, and a live one
// must never miss it. Once the call streams, each heartbeat carries the
// index of the last event the turn took, as the batcher's own do. A
// local call runs inside its workflow task, which the SDK heartbeats.
func (m *modelCall) keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	return ticking(ctx, time.Second, func() { m.beat(ctx) })
}

// beat records a heartbeat with what the call is at: the last index the
// turn took once it streams, what it waits for while the governor holds
// it (admit), nothing otherwise.
func (m *modelCall) beat(ctx context.Context) {
	switch st, w := m.streamed.Load(), m.waiting.Load(); {
	case st != nil:
		activity.RecordHeartbeat(ctx, st.LastIndex())
	case w != nil:
		activity.RecordHeartbeat(ctx, *w)
	default:
		activity.RecordHeartbeat(ctx)
	}
}

// heartbeat records a heartbeat every interval until stop is called.
func heartbeat(ctx context.Context, interval time.Duration) (stop func()) {
	return keepAlive(ctx, interval, nil)
}
