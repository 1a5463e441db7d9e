package pglive

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// startInterrupts runs Interrupts on a database of the test's own until
// the test ends, and returns it once its listener is up.
func startInterrupts(t testing.TB) (*Interrupts, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pgxpool.New(ctx, devtest.Database(t))
	require.NoError(t, err)
	in := NewInterrupts(pool, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		pool.Close()
	})
	require.Eventually(t, in.Connected, waitFor, 5*time.Millisecond)
	return in, pool
}

// TestInterruptStopsTheStreamsCalls: an interruption ends the contexts of
// the calls watching its stream, with ErrInterrupted as the cause, and no
// other stream's; a call that stopped watching is not touched.
func TestInterruptStopsTheStreamsCalls(t *testing.T) {
	in, pool := startInterrupts(t)
	ctx := context.Background()
	a1, stopA1 := in.Watch(ctx, "turn/demo/a")
	defer stopA1()
	a2, stopA2 := in.Watch(ctx, "turn/demo/a")
	defer stopA2()
	b, stopB := in.Watch(ctx, "turn/demo/b")
	defer stopB()
	gone, stopGone := in.Watch(ctx, "turn/demo/a")
	stopGone()

	require.NoError(t, Interrupt(ctx, pool, "turn/demo/a"))
	for _, c := range []context.Context{a1, a2} {
		select {
		case <-c.Done():
		case <-time.After(waitFor):
			t.Fatal("the call was not interrupted")
		}
		require.ErrorIs(t, context.Cause(c), eventlog.ErrInterrupted)
	}
	require.NoError(t, b.Err(), "another stream's call runs on")
	require.NotErrorIs(t, context.Cause(gone), eventlog.ErrInterrupted, "a call that stopped watching ended as it was")
	stopA1()
	stopA2()
	in.mu.Lock()
	defer in.mu.Unlock()
	require.NotContains(t, in.calls, "turn/demo/a", "nothing is kept for a stream no call watches")
}

// BenchmarkInterrupt measures how long an interruption takes from the
// sender's NOTIFY to the call's context ending, over 100 calls: the part
// of a cancellation's way to a model call in flight that the live path
// adds (the gateway's cancel_turn signal goes before it). It reports the
// p50 and p99 of the 100.
func BenchmarkInterrupt(b *testing.B) {
	in, pool := startInterrupts(b)
	ctx := context.Background()
	const calls = 100
	for b.Loop() {
		took := make([]time.Duration, 0, calls)
		for i := range calls {
			id := fmt.Sprintf("turn/demo/bench-%d", i)
			c, stop := in.Watch(ctx, id)
			start := time.Now()
			if err := Interrupt(ctx, pool, id); err != nil {
				b.Fatal(err)
			}
			<-c.Done()
			took = append(took, time.Since(start))
			stop()
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[calls/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(took[calls*99/100].Microseconds())/1000, "p99-ms")
	}
}
