package stream

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestHubFanOut: every subscriber of a stream gets its batches; one that
// does not read is marked lagged instead of blocking the others.
func TestHubFanOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, devtest.Database(t))
	require.NoError(t, err)
	defer pool.Close()
	hub := NewHub(pool, zaptest.NewLogger(t))
	go func() { _ = hub.Run(ctx) }()

	fast := hub.Subscribe("turn/demo/a")
	defer fast.Close()
	stuck := hub.Subscribe("turn/demo/a")
	defer stuck.Close()
	other := hub.Subscribe("turn/demo/b")
	defer other.Close()
	// Subscribing before the listener is up counts as lagging: the
	// subscriber must read the log once.
	for _, s := range []*Subscription{fast, stuck, other} {
		select {
		case <-s.Lagged:
		case <-time.After(10 * time.Second):
			t.Fatal("no lag signal")
		}
	}
	require.Eventually(t, func() bool {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		return hub.connected
	}, 10*time.Second, 5*time.Millisecond)
	for _, s := range []*Subscription{fast, stuck, other} {
		select {
		case <-s.Lagged: // connecting tells everyone to read the log again
		default:
		}
	}

	pub := NewPublisher(pool)
	const n = subscriberBuffer + 50
	// The reading subscriber hands over what it read, when it has all or
	// the test times out; the test's goroutine checks it (require must
	// not run on another goroutine).
	read := make(chan [][]agent.Event, 1)
	go func() {
		var got [][]agent.Event
		defer func() { read <- got }()
		for len(got) < n {
			select {
			case evs := <-fast.C:
				got = append(got, evs)
			case <-ctx.Done():
				return
			}
		}
	}()
	for i := 1; i <= n; i++ {
		require.NoError(t, pub.Publish(ctx, agent.TokenBatch{StreamID: "turn/demo/a", First: int64(i),
			Events: []agent.Event{{StreamID: "turn/demo/a", Index: int64(i), Kind: agent.EventToken, Text: "x"}}}))
	}
	got := <-read
	require.Len(t, got, n, "the reading subscriber got %d of %d batches", len(got), n)
	for i, evs := range got {
		require.Len(t, evs, 1)
		require.Equal(t, int64(i+1), evs[0].Index)
	}
	select {
	case <-stuck.Lagged:
	default:
		t.Fatal("the subscriber that did not read was not told to catch up")
	}
	require.Len(t, stuck.C, subscriberBuffer)
	require.Empty(t, other.C, "other streams' subscribers get nothing")

	require.NoError(t, pub.Wake(ctx, "turn/demo/b"))
	select {
	case evs := <-other.C:
		require.Empty(t, evs, "a wake-up carries no events")
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
	}
}
