package pglive

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// waitFor bounds what happens "at once" on a real Postgres: generous, so
// that only a broken hub fails, never a slow machine.
const waitFor = 10 * time.Second

// startHub runs a hub on a database of the test's own until the test
// ends, and returns it once its listener is up, with a publisher.
func startHub(t *testing.T) (*Hub, *Publisher, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pgxpool.New(ctx, devtest.Database(t))
	require.NoError(t, err)
	hub := NewHub(pool, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		pool.Close()
	})
	require.Eventually(t, hub.Connected, waitFor, 5*time.Millisecond)
	return hub, NewPublisher(pool), pool
}

// receive returns the next live batch of s, failing the test when none
// comes in time.
func receive(t *testing.T, s eventlog.Subscription) []agent.Event {
	t.Helper()
	select {
	case evs := <-s.Events():
		return evs
	case <-time.After(waitFor):
		t.Fatal("no live batch")
		return nil
	}
}

func requireLagged(t *testing.T, s eventlog.Subscription, why string) {
	t.Helper()
	select {
	case <-s.Lagged():
	case <-time.After(waitFor):
		t.Fatalf("no lag signal: %s", why)
	}
}

func tokens(streamID string, first int64, n int) agent.TokenBatch {
	b := agent.TokenBatch{StreamID: streamID, First: first}
	for i := range n {
		b.Events = append(b.Events, agent.Event{StreamID: streamID, Index: first + int64(i), Kind: agent.EventToken, Text: "x"})
	}
	return b
}

// TestHubFanOut: every subscriber of a stream gets its batches; one that
// does not read is marked lagged instead of blocking the others.
func TestHubFanOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub, _ := startHub(t)

	fast := hub.Subscribe("turn/demo/a")
	defer fast.Close()
	stuck := hub.Subscribe("turn/demo/a")
	defer stuck.Close()
	other := hub.Subscribe("turn/demo/b")
	defer other.Close()

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
			case evs := <-fast.Events():
				got = append(got, evs)
			case <-ctx.Done():
				return
			}
		}
	}()
	for i := 1; i <= n; i++ {
		require.NoError(t, pub.Publish(ctx, tokens("turn/demo/a", int64(i), 1)))
	}
	got := <-read
	require.Len(t, got, n, "the reading subscriber got %d of %d batches", len(got), n)
	for i, evs := range got {
		require.Len(t, evs, 1)
		require.Equal(t, int64(i+1), evs[0].Index)
	}
	select {
	case <-stuck.Lagged():
	default:
		t.Fatal("the subscriber that did not read was not told to catch up")
	}
	select {
	case <-fast.Lagged():
		t.Fatal("the subscriber that read was told to catch up")
	default:
	}
	require.Len(t, stuck.Events(), subscriberBuffer)
	require.Empty(t, other.Events(), "other streams' subscribers get nothing")

	require.NoError(t, pub.Wake(ctx, "turn/demo/b"))
	require.Empty(t, receive(t, other), "a wake-up carries no events")
}

// TestHubSubscribedBeforeListening: a subscription made while the
// listener is not up is lagged from its start: it must read the log once.
func TestHubSubscribedBeforeListening(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pgxpool.New(ctx, devtest.Database(t))
	require.NoError(t, err)
	defer pool.Close()
	hub := NewHub(pool, zaptest.NewLogger(t))
	early := hub.Subscribe("turn/demo/a")
	defer early.Close()
	requireLagged(t, early, "subscribed before the listener ran")

	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, hub.Connected, waitFor, 5*time.Millisecond)
	requireLagged(t, early, "connecting tells everyone to read the log again")
	require.NoError(t, NewPublisher(pool).Publish(ctx, tokens("turn/demo/a", 1, 1)))
	require.Equal(t, int64(1), receive(t, early)[0].Index)
}

// TestHubReconnects: when the listener's connection dies, every
// subscriber is told to read the log (notifications may be lost), the hub
// listens again, and batches published after it are delivered.
func TestHubReconnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub, pool := startHub(t)
	sub := hub.Subscribe("turn/demo/a")
	defer sub.Close()
	require.NoError(t, pub.Publish(ctx, tokens("turn/demo/a", 1, 1)))
	require.Equal(t, int64(1), receive(t, sub)[0].Index)

	var killed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'LISTEN '||$1`, Channel).Scan(&killed))
	require.Equal(t, 1, killed, "the hub listens on one connection")
	requireLagged(t, sub, "the listener was lost")

	// Once it listens again, what is published reaches the subscriber.
	// Batches published while it reconnects may be lost: that is what the
	// lag signal is for, so the test publishes until one arrives.
	var got []agent.Event
	require.Eventually(t, func() bool {
		if err := pub.Publish(ctx, tokens("turn/demo/a", 2, 1)); err != nil {
			return false
		}
		select {
		case got = <-sub.Events():
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, waitFor, time.Millisecond)
	require.Equal(t, int64(2), got[0].Index)
	require.True(t, hub.Connected())
}

// TestHubIgnoresMalformedNotifications: a notification on the channel
// that is not a batch (anyone who can connect can NOTIFY) is dropped, and
// the hub goes on delivering.
func TestHubIgnoresMalformedNotifications(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub, pool := startHub(t)
	sub := hub.Subscribe("turn/demo/a")
	defer sub.Close()
	for _, payload := range []string{"not json", `{"e":[{"event_index":1}]}`, `{"s":"turn/demo/a","e":"x"}`, `[]`} {
		_, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, payload)
		require.NoError(t, err, payload)
	}
	require.NoError(t, pub.Publish(ctx, tokens("turn/demo/a", 7, 1)))
	require.Equal(t, int64(7), receive(t, sub)[0].Index, "the first delivery is the valid batch")
}

// TestPublisherLargeBatchWakes: a batch too large for one notification
// goes as a wake-up; one that fits goes whole, with its events as
// published.
func TestPublisherLargeBatchWakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub, _ := startHub(t)
	sub := hub.Subscribe("turn/demo/a")
	defer sub.Close()

	small := tokens("turn/demo/a", 1, 2)
	small.Events[1].Text = "héllo \"world\"\n"
	require.NoError(t, pub.Publish(ctx, small))
	require.Equal(t, small.Events, receive(t, sub))

	big := tokens("turn/demo/a", 3, 1)
	big.Events[0].Text = strings.Repeat("x", maxPayload)
	require.NoError(t, pub.Publish(ctx, big))
	require.Empty(t, receive(t, sub), "too large for NOTIFY: a wake-up")
}
