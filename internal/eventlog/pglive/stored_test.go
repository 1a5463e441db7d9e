package pglive

import (
	"context"
	"strings"
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

	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 3, "Hel", "lo"), false))
	require.Equal(t, []int64{3, 4}, eventIndices(receive(t, sub)), "published as it is stored")
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 5, " wor"), true))
	receive(t, sub)

	evs, err := hub.Stored(ctx, stream, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, eventIndices(evs), "after an index, from inside a batch")

	// Attempt 2 claims: it reads all of attempt 1, which cannot append
	// again, while attempt 2 can.
	evs, err = pub.Claim(ctx, stream, 1, 2, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4, 5}, eventIndices(evs))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 1, 6, "ld"), true), eventlog.ErrFenced)
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 2, 6, "Hello"), true))
	require.Equal(t, []int64{6}, eventIndices(receive(t, sub)), "the fenced batch was not published")
	_, err = pub.Claim(ctx, stream, 1, 1, 3)
	require.ErrorIs(t, err, eventlog.ErrFenced, "an older attempt cannot claim back")

	// The same index twice is refused: an attempt writes only after
	// what it read.
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 2, 6, "again"), true), eventlog.ErrFenced)

	// The next step's first attempt needs no claim of its own.
	require.NoError(t, pub.Append(ctx, callBatch(stream, 2, 1, 9, "next"), false))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 2, 7, "late"), true), eventlog.ErrFenced)

	// A sealed call (the newest attempt there can be) takes what it
	// streamed, contiguous from the log's head.
	evs, err = pub.Claim(ctx, stream, 2, 1<<30, 9)
	require.NoError(t, err)
	require.Equal(t, []int64{9}, eventIndices(evs))
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 2, 1, 10, "more"), true), eventlog.ErrFenced)
	_, err = pub.Claim(ctx, stream, 2, 1<<30, 8)
	require.ErrorContains(t, err, "do not continue its log at index 8")

	require.NoError(t, pub.Forget(ctx, stream))
	evs, err = hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 20, "a new run"), false), "forgotten: the fence is gone too")
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 21, "'s next batch"), true), "held: the new run's own fence")
}

// TestPublishFenced: a signalled call's batches are published, not
// stored, fenced as appended ones are: once a newer attempt has fenced
// the stream, an older one publishes nothing, and an older attempt
// cannot fence it back; a later step's call publishes over any attempt
// of an earlier one.
func TestPublishFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub := startStored(t)
	const stream = "turn/demo/signalled"
	sub := hub.Subscribe(stream)
	defer sub.Close()

	require.NoError(t, pub.PublishFenced(ctx, callBatch(stream, 1, 1, 3, "Hel")))
	require.Equal(t, []int64{3}, eventIndices(receive(t, sub)))
	evs, err := hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Empty(t, evs, "the turn logs it from its signal")

	require.NoError(t, pub.Fence(ctx, stream, 1, 2))
	require.ErrorIs(t, pub.PublishFenced(ctx, callBatch(stream, 1, 1, 4, "lo")), eventlog.ErrFenced)
	require.ErrorIs(t, pub.Fence(ctx, stream, 1, 1), eventlog.ErrFenced, "an older attempt cannot fence back")
	require.NoError(t, pub.PublishFenced(ctx, callBatch(stream, 1, 2, 4, "Hello")))
	require.Equal(t, []int64{4}, eventIndices(receive(t, sub)), "the fenced batch was not published")

	require.NoError(t, pub.PublishFenced(ctx, callBatch(stream, 2, 1, 9, "next")))
	require.Equal(t, []int64{9}, eventIndices(receive(t, sub)))
	require.ErrorIs(t, pub.PublishFenced(ctx, callBatch(stream, 1, 2, 5, "late")), eventlog.ErrFenced)

	// Too large for a notification: a wake-up, and the fence holds too.
	big := callBatch(stream, 2, 1, 10, strings.Repeat("x", 2*maxPayload))
	require.NoError(t, pub.PublishFenced(ctx, big))
	require.Empty(t, receive(t, sub), "a wake-up")
	require.NoError(t, pub.Fence(ctx, stream, 2, 2))
	require.ErrorIs(t, pub.PublishFenced(ctx, big), eventlog.ErrFenced)
	require.NoError(t, pub.PublishFenced(ctx, callBatch(stream, 2, 2, 10, "x")))
	require.Equal(t, []int64{10}, eventIndices(receive(t, sub)), "the fenced wake-up was not published")
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
	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 1, string(big)), false))
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

// TestNextAttempt: a new attempt of a step is numbered past every attempt
// of the step that claimed the stream, and at least as asked; it fences
// the earlier ones off; a later step, or a sealed one, refuses it.
func TestNextAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, pub := startStored(t)
	const stream = "turn/demo/local"
	steps := []struct {
		name        string
		step, least int
		want        int
		wantErr     error
	}{
		{"a stream's first call", 1, 1, 1, nil},
		{"the same call run again from its first attempt", 1, 1, 2, nil},
		{"and again", 1, 1, 3, nil},
		{"a fallback model's attempts, numbered past the failed model's", 1, 7, 7, nil},
		{"the next step starts over", 3, 1, 1, nil},
		{"an earlier step is refused", 1, 1, 0, eventlog.ErrFenced},
	}
	for _, s := range steps {
		n, err := pub.NextAttempt(ctx, stream, s.step, s.least)
		if s.wantErr != nil {
			require.ErrorIs(t, err, s.wantErr, s.name)
			continue
		}
		require.NoError(t, err, s.name)
		require.Equal(t, s.want, n, s.name)
	}
	// The lost attempt that still runs somewhere cannot append after the
	// new one claimed the stream.
	n, err := pub.NextAttempt(ctx, stream, 3, 1)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 3, 1, 9, "stale"), true), eventlog.ErrFenced)
	require.NoError(t, pub.Append(ctx, callBatch(stream, 3, 2, 9, "fresh"), true))

	// A sealed step takes no new attempt.
	_, err = pub.Claim(ctx, stream, 3, sealed, 10)
	require.NoError(t, err)
	_, err = pub.NextAttempt(ctx, stream, 3, 1)
	require.ErrorIs(t, err, eventlog.ErrFenced)
}

// sealed is the attempt SealStream claims with (math.MaxInt32).
const sealed = 1<<31 - 1

// TestPut: the turn's own events handed to an activity are stored,
// whatever attempt of a call has claimed the stream, and published; handed
// on again (a workflow task run again), they are stored once.
func TestPut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub := startStored(t)
	const stream = "turn/demo/put"
	_, err := pub.Claim(ctx, stream, 3, 2, 1)
	require.NoError(t, err)
	handed := agent.TokenBatch{StreamID: stream, First: 1, Events: []agent.Event{
		{StreamID: stream, Index: 1, Kind: agent.EventStatus, Status: agent.StreamRunning},
		{StreamID: stream, Index: 2, Kind: agent.EventStepStart, Step: 1},
	}}
	require.NoError(t, pub.Put(ctx, handed), "a claim fences calls' batches, not the turn's events")
	require.NoError(t, pub.Put(ctx, handed))
	got, err := hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Equal(t, handed.Events, got)
	require.NoError(t, pub.Put(ctx, agent.TokenBatch{StreamID: stream}), "nothing to store")
}

// TestForgetKeepsSealedCallFenced: a call the turn sealed (a regular
// activity stopped by a cancellation runs on until its next heartbeat)
// must not append again once the turn's last activity has forgotten the
// stream: what it appended then would be published at the indices the
// turn gives its closing events, and followers would be shown what the
// log never holds.
func TestForgetKeepsSealedCallFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hub, pub := startStored(t)
	const stream = "turn/demo/sealed"
	sub := hub.Subscribe(stream)
	defer sub.Close()

	require.NoError(t, pub.Append(ctx, callBatch(stream, 1, 1, 5, "Once", " upon"), false))
	receive(t, sub)
	evs, err := pub.Claim(ctx, stream, 1, sealed, 5)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, eventIndices(evs), "the seal takes what was shown")
	require.NoError(t, pub.Forget(ctx, stream))

	require.ErrorIs(t, pub.Append(ctx, callBatch(stream, 1, 1, 7, " a time"), true), eventlog.ErrFenced,
		"the sealed attempt appends nothing after the turn forgot the stream")
	evs, err = hub.Stored(ctx, stream, 0)
	require.NoError(t, err)
	require.Empty(t, evs)
}
