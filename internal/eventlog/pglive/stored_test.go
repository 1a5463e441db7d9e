package pglive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/store"
)

// startStored runs a hub on a migrated database of the test's own.
func startStored(t *testing.T) (*Hub, *Publisher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	hub := NewHub(st.Pool(), zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		st.Close()
	})
	require.Eventually(t, hub.Connected, waitFor, 5*time.Millisecond)
	return hub, NewPublisher(st.Pool())
}

func callBatch(streamID string, step, attempt int, first int64, texts ...string) agent.TokenBatch {
	b := agent.TokenBatch{StreamID: streamID, Step: step, Attempt: attempt, First: first}
	for i, s := range texts {
		b.Events = append(b.Events, agent.Event{StreamID: streamID, Index: first + int64(i), Kind: agent.EventToken, Text: s, Step: step, Attempt: attempt})
	}
	return b
}

// TestAppendClaim: appended batches are published and stored; a claim by
// a later attempt returns them and fences the earlier attempt off; a
// later step's call claims over any attempt of an earlier one; Forget
// drops what was stored.
func TestAppendClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub := startStored(t)
	const stream = "turn/demo/live"
	sub := hub.Subscribe(stream)
	defer sub.Close()

	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 3, "Hel", "lo")))
	require.Equal(t, []int64{3, 4}, eventIndices(receive(t, sub)), "published as it is stored")
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 5, " wor")))
	receive(t, sub)

	evs, err := hub.Stored(ctx, stream, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, eventIndices(evs), "after an index, from inside a batch")

	// Attempt 2 claims: it reads all of attempt 1, which cannot append
	// again, while attempt 2 can.
	evs, err = pub.Claim(ctx, stream, 1, 2, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4, 5}, eventIndices(evs))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 1, 6, "ld")), eventlog.ErrFenced)
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 2, 6, "Hello")))
	require.Equal(t, []int64{6}, eventIndices(receive(t, sub)), "the fenced batch was not published")
	_, err = pub.Claim(ctx, stream, 1, 1, 3)
	require.ErrorIs(t, err, eventlog.ErrFenced, "an older attempt cannot claim back")

	// The same index twice is refused: an attempt writes only after
	// what it read.
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 2, 6, "again")), eventlog.ErrFenced)

	// The next step's first attempt needs no claim of its own.
	require.NoError(t, pub.Append(ctx, callBatch(stream, 2, 1, 9, "next")))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 2, 7, "late")), eventlog.ErrFenced)

	// A sealed call (the newest attempt there can be) takes what it
	// streamed, contiguous from the log's head.
	evs, err = pub.Claim(ctx, stream, 2, 1<<30, 9)
	require.NoError(t, err)
	require.Equal(t, []int64{9}, eventIndices(evs))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 2, 1, 10, "more")), eventlog.ErrFenced)
	_, err = pub.Claim(ctx, stream, 2, 1<<30, 8)
	require.ErrorContains(t, err, "do not continue its log at index 8")

	require.NoError(t, pub.Forget(ctx, stream))
	evs, err = hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 20, "a new run")), "forgotten: the fence is gone too")
}

// TestAppendLargeBatch: a batch too large for a notification is stored
// and announced with a wake-up; followers read it stored.
func TestAppendLargeBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub := startStored(t)
	const stream = "turn/demo/large"
	sub := hub.Subscribe(stream)
	defer sub.Close()
	big := make([]byte, 2*maxPayload)
	for i := range big {
		big[i] = 'x'
	}
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 1, string(big))))
	require.Empty(t, receive(t, sub), "a wake-up")
	evs, err := hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, string(big), evs[0].Text)
}

func eventIndices(evs []agent.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Index)
	}
	return out
}
