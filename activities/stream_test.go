package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Generous bounds for things that happen "at once": they only fail a
// broken streamer, never a slow machine.
const (
	waitFor = 10 * time.Second
	tick    = 2 * time.Millisecond
)

// recordingLink is a turnLink that records what the streamer sends. It is
// our own seam (the streamer's way to its turn), so the batcher can be
// checked without a turn. A send can be held until the test lets it go,
// be slow, or fail.
type recordingLink struct {
	headIndex int64         // what head returns
	headErr   error         // what head fails with
	failAt    int           // the send (counted from 1) that fails; 0: none
	gate      chan struct{} // when set, each send waits for a value from it
	delay     time.Duration // how long each send takes

	mu          sync.Mutex
	sent        []sentBatch // the sends that succeeded
	started     int         // sends begun
	inFlight    int
	maxInFlight int
	heads       int
}

type sentBatch struct {
	agent.TokenBatch
	notify     string
	start, end time.Time
}

var errTurnGone = errors.New("turn is gone")

func (l *recordingLink) send(ctx context.Context, b agent.TokenBatch, notify string) error {
	start := time.Now()
	l.mu.Lock()
	l.started++
	n := l.started
	l.inFlight++
	l.maxInFlight = max(l.maxInFlight, l.inFlight)
	l.mu.Unlock()

	var err error
	switch {
	case l.gate != nil:
		select {
		case <-l.gate:
		case <-ctx.Done():
			err = ctx.Err()
		}
	case l.delay > 0:
		select {
		case <-time.After(l.delay):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if n == l.failAt {
		err = errTurnGone
	}
	if err != nil {
		return err
	}
	l.sent = append(l.sent, sentBatch{TokenBatch: b, notify: notify, start: start, end: time.Now()})
	return nil
}

func (l *recordingLink) head(context.Context, string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heads++
	return l.headIndex, l.headErr
}

func (l *recordingLink) batches() []sentBatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sentBatch(nil), l.sent...)
}

func (l *recordingLink) sentCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

func (l *recordingLink) startedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

func (l *recordingLink) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// streamInput is a streaming call of step 2 whose first event index is
// first.
func streamInput(first int64) contract.CallModelInput {
	return contract.CallModelInput{TenantID: "demo", JobID: "job-1", Seq: 2,
		Stream: true, StreamID: "turn/demo/job-1", FirstIndex: first, Notify: "parent"}
}

// startTestStreamer starts a streamer for attempt of in, inside an
// activity, and stops it when the test ends.
func startTestStreamer(t *testing.T, interval time.Duration, maxBytes int, in contract.CallModelInput, attempt int, link turnLink) (*streamer, *heartbeatRecorder) {
	t.Helper()
	actx, beats := activityContext(t)
	ctx, cancel := context.WithCancel(actx)
	a := &Activities{logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), streamInterval: interval, streamMaxBytes: maxBytes}
	s, err := a.startStreamer(ctx, in, attempt, link)
	require.NoError(t, err)
	// Runs before the activity ends: the streamer heartbeats until done.
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s, beats
}

func texts(bs []sentBatch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Text())
	}
	return out
}

func sentEvents(bs []sentBatch) []agent.Event {
	var out []agent.Event
	for _, b := range bs {
		out = append(out, b.Events...)
	}
	return out
}

// requireGapFree checks that the batches continue each other from index
// first, each stamped with the call's stream, step and attempt.
func requireGapFree(t *testing.T, bs []sentBatch, first int64, in contract.CallModelInput, attempt int) {
	t.Helper()
	next := first
	for i, b := range bs {
		require.Equal(t, next, b.First, "batch %d", i)
		require.NotEmpty(t, b.Events, "batch %d", i)
		require.Equal(t, in.StreamID, b.StreamID)
		require.Equal(t, in.Seq, b.Step)
		require.Equal(t, attempt, b.Attempt)
		require.Equal(t, in.Notify, b.notify)
		for j, e := range b.Events {
			require.Equal(t, b.First+int64(j), e.Index, "batch %d event %d", i, j)
			require.Equal(t, in.StreamID, e.StreamID)
			require.Equal(t, in.Seq, e.Step)
			require.Equal(t, attempt, e.Attempt)
		}
		next += int64(len(b.Events))
	}
}

// requireHeartbeats checks that the heartbeats report the last index the
// turn took: before, the index before the call's first, or a batch's last
// index, in order, and never one of a batch that was not taken. (Batches
// are not heartbeaten one by one: the one-second heartbeat reports the
// latest, and a short call sends none of its own.)
func requireHeartbeats(t *testing.T, beats []int64, bs []sentBatch, before int64) {
	t.Helper()
	taken := map[int64]bool{before: true}
	for _, b := range bs {
		taken[b.First+int64(len(b.Events))-1] = true
	}
	require.IsNonDecreasing(t, beats)
	for _, v := range beats {
		require.True(t, taken[v], "heartbeat %d is not the last index of a batch the turn took (heartbeats %v)", v, beats)
	}
}

func TestStreamerSendsFirstTextAtOnce(t *testing.T) {
	link := &recordingLink{}
	in := streamInput(7)
	// An hour between batches: the first one can only be in time if it
	// does not wait for the interval.
	s, beats := startTestStreamer(t, time.Hour, 1<<20, in, 1, link)

	require.NoError(t, s.add(t.Context(), "Hel"))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
	require.NoError(t, s.add(t.Context(), "lo"))
	require.NoError(t, s.add(t.Context(), " world"))
	require.Equal(t, 1, link.startedCount(), "later text waits for the interval")

	require.NoError(t, s.close(), "close sends what is left")
	bs := link.batches()
	require.Equal(t, []string{"Hel", "lo world"}, texts(bs))
	requireGapFree(t, bs, 7, in, 1)
	requireHeartbeats(t, beats.all(), bs, 6)
}

func TestStreamerSendsAtMostEveryInterval(t *testing.T) {
	const interval = 100 * time.Millisecond
	link := &recordingLink{}
	in := streamInput(1)
	s, beats := startTestStreamer(t, interval, 1<<20, in, 1, link)

	// A model that streams a piece every 5 ms for about 300 ms.
	const adds = 60
	var want strings.Builder
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for i := range adds {
		<-pace.C
		piece := fmt.Sprintf("w%d ", i)
		want.WriteString(piece)
		require.NoError(t, s.add(t.Context(), piece))
	}
	// Let the last text leave on its own: close would send it at once.
	require.Eventually(t, func() bool { return strings.Join(texts(link.batches()), "") == want.String() }, waitFor, tick)
	require.NoError(t, s.close())

	bs := link.batches()
	require.Less(t, len(bs), adds, "pieces are batched")
	for i := 1; i < len(bs); i++ {
		// The streamer starts the interval when a send returns, after the
		// link's end stamp, so the gap cannot be shorter on any machine.
		require.GreaterOrEqual(t, bs[i].start.Sub(bs[i-1].end), interval, "batch %d left early", i)
	}
	requireGapFree(t, bs, 1, in, 1)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestStreamerSendsFullBatchEarly(t *testing.T) {
	link := &recordingLink{}
	in := streamInput(1)
	s, beats := startTestStreamer(t, time.Hour, 8, in, 1, link)

	require.NoError(t, s.add(t.Context(), "a"))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)

	require.NoError(t, s.add(t.Context(), "0123"))
	require.Equal(t, 1, link.startedCount(), "4 bytes of 8 wait for the interval")
	require.NoError(t, s.add(t.Context(), "4567"))
	// With an hour's interval, only the size cap sends it.
	require.Eventually(t, func() bool { return link.sentCount() == 2 }, waitFor, tick)

	require.NoError(t, s.add(t.Context(), "xy"))
	require.Equal(t, 2, link.startedCount())
	require.NoError(t, s.close())

	bs := link.batches()
	require.Equal(t, []string{"a", "01234567", "xy"}, texts(bs))
	requireGapFree(t, bs, 1, in, 1)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestStreamerWaitsForSendInFlight(t *testing.T) {
	link := &recordingLink{gate: make(chan struct{})}
	in := streamInput(3)
	s, beats := startTestStreamer(t, 10*time.Millisecond, 1<<20, in, 1, link)

	require.NoError(t, s.add(t.Context(), "first"))
	require.Eventually(t, func() bool { return link.busy() == 1 }, waitFor, tick)

	// The turn is slow to take the first batch; the model goes on, and
	// add does not wait for the network (it would block this test).
	var more strings.Builder
	for i := range 20 {
		piece := fmt.Sprintf(" w%d", i)
		more.WriteString(piece)
		require.NoError(t, s.add(t.Context(), piece))
	}
	require.Equal(t, 1, link.startedCount(), "no second send while the first is in flight")

	link.gate <- struct{}{} // the first send returns
	require.Eventually(t, func() bool { return link.busy() == 1 && link.startedCount() == 2 }, waitFor, tick)
	link.gate <- struct{}{}
	require.NoError(t, s.close())

	bs := link.batches()
	require.Equal(t, []string{"first", more.String()}, texts(bs), "what waited goes as one batch")
	require.Equal(t, 1, link.maxInFlight)
	requireGapFree(t, bs, 3, in, 1)
	requireHeartbeats(t, beats.all(), bs, 2)
}

func TestStreamerSlowSendGivesFewerLargerBatches(t *testing.T) {
	link := &recordingLink{delay: 300 * time.Millisecond}
	in := streamInput(1)
	s, beats := startTestStreamer(t, 50*time.Millisecond, 1<<20, in, 1, link)

	// About 600 ms of text, a piece every 10 ms: with 50 ms batches and an
	// instant turn that would be a dozen batches or more.
	const adds = 60
	var want strings.Builder
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for i := range adds {
		<-pace.C
		piece := fmt.Sprintf("w%d ", i)
		want.WriteString(piece)
		require.NoError(t, s.add(t.Context(), piece))
	}
	require.NoError(t, s.close())

	bs := link.batches()
	require.Equal(t, want.String(), strings.Join(texts(bs), ""))
	require.Equal(t, 1, link.maxInFlight, "never two sends in flight")
	for i := 1; i < len(bs); i++ {
		require.False(t, bs[i].start.Before(bs[i-1].end), "batch %d overlaps the one before", i)
	}
	// Each send takes 300 ms, so 600 ms of text fits in a handful of
	// batches; a third of the pieces leaves ample room for a slow machine.
	require.Less(t, len(bs), adds/3)
	requireGapFree(t, bs, 1, in, 1)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestStreamerAbortSendsNothingBuffered(t *testing.T) {
	tests := []struct {
		name string
		hold bool // abort while the first batch is still being sent
	}{
		{name: "text waiting for the interval"},
		{name: "text waiting behind a send in flight", hold: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &recordingLink{}
			if tt.hold {
				link.gate = make(chan struct{})
			}
			s, _ := startTestStreamer(t, time.Hour, 1<<20, streamInput(1), 1, link)

			require.NoError(t, s.add(t.Context(), "kept"))
			require.Eventually(t, func() bool { return link.startedCount() == 1 }, waitFor, tick)
			require.NoError(t, s.add(t.Context(), " dropped"))

			aborted := make(chan struct{})
			go func() {
				s.abort()
				close(aborted)
			}()
			if tt.hold {
				// abort drops the buffer, then waits for the send in flight.
				require.Eventually(t, func() bool { return s.size() == 0 }, waitFor, tick)
				link.gate <- struct{}{}
			}
			<-aborted

			require.Equal(t, 1, link.startedCount())
			require.Equal(t, []string{"kept"}, texts(link.batches()))
		})
	}
}

func TestStreamerSendErrorStopsStream(t *testing.T) {
	tests := []struct {
		name   string
		failAt int
	}{
		{name: "first send fails", failAt: 1},
		{name: "a later send fails", failAt: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &recordingLink{failAt: tt.failAt}
			in := streamInput(1)
			s, beats := startTestStreamer(t, 10*time.Millisecond, 1<<20, in, 1, link)

			for i := 1; i < tt.failAt; i++ {
				require.NoError(t, s.add(t.Context(), "ok "))
				require.Eventually(t, func() bool { return link.sentCount() == i }, waitFor, tick)
			}
			require.NoError(t, s.add(t.Context(), "lost"))
			// Once the send has failed, add returns its error: the model
			// call stops instead of streaming into the void.
			require.Eventually(t, func() bool { return errors.Is(s.add(t.Context(), " more"), errTurnGone) }, waitFor, tick)
			require.ErrorIs(t, s.add(t.Context(), " and more"), errTurnGone)
			require.ErrorIs(t, s.close(), errTurnGone)

			require.Equal(t, tt.failAt, link.startedCount(), "nothing is sent after a failure")
			bs := link.batches()
			require.Len(t, bs, tt.failAt-1)
			requireGapFree(t, bs, 1, in, 1)
			requireHeartbeats(t, beats.all(), bs, 0)
		})
	}
}

func TestStreamerFencesRetriedAttempt(t *testing.T) {
	const first = 5
	in := streamInput(first)
	token := func(index int64, attempt int) agent.Event {
		return agent.Event{StreamID: in.StreamID, Index: index, Kind: agent.EventToken, Text: "Hi", Step: in.Seq, Attempt: attempt}
	}
	tests := []struct {
		name      string
		attempt   int
		head      int64
		headErr   error
		wantHeads int
		wantFirst int64
		want      []agent.Event
		wantErr   error
	}{
		{
			name:    "first attempt",
			attempt: 1, head: 9,
			wantHeads: 0, // TestActivityEnvironment's attempt: the head is not read
			wantFirst: first,
			want:      []agent.Event{token(first, 1)},
		},
		{
			name:    "retry after an attempt streamed text",
			attempt: 3, head: 9,
			wantHeads: 1,
			wantFirst: 9,
			want: []agent.Event{
				{StreamID: in.StreamID, Index: 9, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: first, Attempt: 3, Step: in.Seq},
				token(10, 3),
			},
		},
		{
			name:    "retry before any text was streamed",
			attempt: 2, head: first,
			wantHeads: 1,
			wantFirst: first,
			want:      []agent.Event{token(first, 2)},
		},
		{
			name:    "retry with the head short of the call's first index",
			attempt: 2, head: first - 2,
			wantHeads: 1,
			wantFirst: first,
			want:      []agent.Event{token(first, 2)},
		},
		{
			name:    "retry that cannot read the head",
			attempt: 2, headErr: errTurnGone,
			wantHeads: 1,
			wantErr:   errTurnGone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &recordingLink{headIndex: tt.head, headErr: tt.headErr}
			if tt.wantErr != nil {
				ctx, _ := activityContext(t)
				a := &Activities{logger: zap.NewNop(), streamInterval: time.Millisecond, streamMaxBytes: 1 << 20}
				_, err := a.startStreamer(ctx, in, tt.attempt, link)
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, tt.wantHeads, link.heads)
				require.Zero(t, link.startedCount())
				return
			}

			s, beats := startTestStreamer(t, 10*time.Millisecond, 1<<20, in, tt.attempt, link)
			if tt.want[0].Status == agent.StreamRetrying {
				// The fence goes out at once, before the model's first text.
				require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
				require.Equal(t, tt.want[:1], link.batches()[0].Events)
			}
			require.NoError(t, s.add(t.Context(), "Hi"))
			require.NoError(t, s.close())

			bs := link.batches()
			require.Equal(t, tt.want, sentEvents(bs))
			require.Equal(t, tt.wantHeads, link.heads)
			requireGapFree(t, bs, tt.wantFirst, in, tt.attempt)
			requireHeartbeats(t, beats.all(), bs, tt.wantFirst-1)
		})
	}
}
