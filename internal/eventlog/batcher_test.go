package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Generous bounds for things that happen "at once": they only fail a
// broken batcher, never a slow machine.
const (
	waitFor = 10 * time.Second
	tick    = 2 * time.Millisecond
)

// recordingSink is a Sink that records what the batcher sends. It is our
// own seam (the batcher's way to its turn), so the batcher can be checked
// without a turn. A send can be held until the test lets it go, be slow,
// or fail.
type recordingSink struct {
	headIndex int64         // what head returns
	headErr   error         // what head fails with
	failAt    int           // the send (counted from 1) that fails; 0: none
	gate      chan struct{} // when set, each send waits for a value from it
	delay     time.Duration // how long each send takes
	notTaken  bool          // SendFirst fails: the turn took another attempt's batch

	mu          sync.Mutex
	sent        []sentBatch // the sends that succeeded
	started     int         // sends begun
	inFlight    int
	maxInFlight int
	heads       int
	reads       []string // fences and head reads, in order ("fence 3", "head")
	handedOn    []contract.Live
	// handedAtFirstSend is how many hand-ons came before the first batch.
	handedAtFirstSend int
	// stored is what the live path holds (Append, Claim); claims records
	// each claim's attempt, and claimErr fails them.
	stored   []agent.Event
	appended []agent.TokenBatch
	held     []bool // each append's held, failed ones too
	claims   []int
	claimErr error
}

type sentBatch struct {
	agent.TokenBatch
	start, end time.Time
	first      bool // sent with SendFirst
}

var errTurnGone = errors.New("turn is gone")

func (l *recordingSink) Send(ctx context.Context, b agent.TokenBatch) error {
	return l.send(ctx, b, false)
}

func (l *recordingSink) SendFirst(ctx context.Context, b agent.TokenBatch) error {
	if l.notTaken {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.started++
		return ErrNotTaken
	}
	return l.send(ctx, b, true)
}

func (l *recordingSink) send(ctx context.Context, b agent.TokenBatch, first bool) error {
	start := time.Now()
	l.mu.Lock()
	l.started++
	n := l.started
	if n == 1 {
		l.handedAtFirstSend = len(l.handedOn)
	}
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
	l.sent = append(l.sent, sentBatch{TokenBatch: b, start: start, end: time.Now(), first: first})
	return nil
}

func (l *recordingSink) Head(context.Context, string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heads++
	l.reads = append(l.reads, "head")
	return l.headIndex, l.headErr
}

func (l *recordingSink) Fence(_ context.Context, _ string, _, attempt int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads = append(l.reads, fmt.Sprintf("fence %d", attempt))
	return nil
}

func (l *recordingSink) HandOn(_ context.Context, _ string, live contract.Live) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handedOn = append(l.handedOn, live)
}

func (l *recordingSink) Append(_ context.Context, b agent.TokenBatch, held bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = append(l.held, held)
	l.started++
	if l.started == l.failAt {
		return errTurnGone
	}
	l.appended = append(l.appended, b)
	l.stored = append(l.stored, b.Events...)
	return nil
}

func (l *recordingSink) Claim(_ context.Context, _ string, _, attempt int, from int64) ([]agent.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, attempt)
	if l.claimErr != nil {
		return nil, l.claimErr
	}
	var out []agent.Event
	for _, e := range l.stored {
		if e.Index >= from {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *recordingSink) Stored(_ context.Context, _ string, after int64) ([]agent.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []agent.Event
	for _, e := range l.stored {
		if e.Index > after {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *recordingSink) batches() []sentBatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sentBatch(nil), l.sent...)
}

func (l *recordingSink) sentCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

func (l *recordingSink) startedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

func (l *recordingSink) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// streamCall is attempt 1 of a streaming call of step 2 whose first event
// index is first.
func streamCall(first int64) Call {
	return Call{StreamID: "turn/demo/job-1", Step: 2, Attempt: 1, First: first}
}

// startTestBatcher starts a batcher for c, inside an activity, and stops
// it when the test ends.
func startTestBatcher(t *testing.T, interval time.Duration, maxBytes int, c Call, link Sink) (*Batcher, *heartbeatRecorder) {
	t.Helper()
	actx, beats := activityContext(t)
	ctx, cancel := context.WithCancel(actx)
	s, err := StartBatcher(ctx, link, c, interval, maxBytes)
	require.NoError(t, err)
	// Runs before the activity ends: the batcher heartbeats until done.
	t.Cleanup(func() {
		cancel()
		<-s.Done()
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
func requireGapFree(t *testing.T, bs []sentBatch, first int64, c Call) {
	t.Helper()
	next := first
	for i, b := range bs {
		require.Equal(t, next, b.First, "batch %d", i)
		require.NotEmpty(t, b.Events, "batch %d", i)
		require.Equal(t, c.StreamID, b.StreamID)
		require.Equal(t, c.Step, b.Step)
		require.Equal(t, c.Attempt, b.Attempt)
		for j, e := range b.Events {
			require.Equal(t, b.First+int64(j), e.Index, "batch %d event %d", i, j)
			require.Equal(t, c.StreamID, e.StreamID)
			require.Equal(t, c.Step, e.Step)
			require.Equal(t, c.Attempt, e.Attempt)
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

func TestBatcherSendsFirstTextAtOnce(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(7)
	// An hour between batches: the first one can only be in time if it
	// does not wait for the interval.
	s, beats := startTestBatcher(t, time.Hour, 1<<20, in, link)

	require.NoError(t, s.Add(t.Context(), "Hel"))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
	require.NoError(t, s.Add(t.Context(), "lo"))
	require.NoError(t, s.Add(t.Context(), " world"))
	require.Equal(t, 1, link.startedCount(), "later text waits for the interval")

	require.NoError(t, s.Close(), "close sends what is left")
	bs := link.batches()
	require.Equal(t, []string{"Hel", "lo world"}, texts(bs))
	requireGapFree(t, bs, 7, in)
	requireHeartbeats(t, beats.all(), bs, 6)
}

// TestBatcherArgumentsWaitTheInterval: argument fragments alone are no
// first token: they wait the interval (or the call's end, which hands
// them on in its result), and the first text after them leaves at once
// with them.
func TestBatcherArgumentsWaitTheInterval(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(1)
	s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)
	ctx := t.Context()
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", ""))
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", `{"expression": "2+2"}`))
	require.Never(t, func() bool { return link.startedCount() > 0 }, 100*time.Millisecond, tick, "arguments alone wait")
	batch, ok, err := s.CloseTail()
	require.NoError(t, err)
	require.True(t, ok, "the call's result hands them on")
	require.Equal(t, []agent.Event{{Kind: agent.EventToolArgsDelta, StreamID: in.StreamID, Index: 1, Step: in.Step, Attempt: in.Attempt,
		Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: `{"expression": "2+2"}`}}}, batch.Events)
	require.Zero(t, link.startedCount())

	link2 := &recordingSink{}
	s2, _ := startTestBatcher(t, time.Hour, 1<<20, streamCall(1), link2)
	require.NoError(t, s2.AddToolArgs(ctx, "call_1", "calculator", `{}`))
	require.NoError(t, s2.Add(ctx, "Done."))
	require.Eventually(t, func() bool { return link2.sentCount() == 1 }, waitFor, tick, "text leaves at once, with the arguments before it")
	require.Len(t, link2.batches()[0].Events, 2)
	require.NoError(t, s2.Close())
}

// TestBatcherTextAfterArgumentsWait: text that comes after the sender
// has taken the arguments' kick, and waits without hurry, still leaves at
// once (seen once on a loaded machine, where the sender ran between the
// two).
func TestBatcherTextAfterArgumentsWait(t *testing.T) {
	link := &recordingSink{}
	s, _ := startTestBatcher(t, time.Hour, 1<<20, streamCall(1), link)
	ctx := t.Context()
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", `{}`))
	// The sender has taken the kick: it waits, the arguments alone no hurry.
	require.Eventually(t, func() bool { return len(s.kick) == 0 }, waitFor, tick)
	require.NoError(t, s.Add(ctx, "Done."))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick, "text leaves at once, with the arguments before it")
	require.Len(t, link.batches()[0].Events, 2)
	require.NoError(t, s.Close())
}

func TestBatcherSendsAtMostEveryInterval(t *testing.T) {
	const interval = 100 * time.Millisecond
	link := &recordingSink{}
	in := streamCall(1)
	s, beats := startTestBatcher(t, interval, 1<<20, in, link)

	// A model that streams a piece every 5 ms for about 300 ms.
	const adds = 60
	var want strings.Builder
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for i := range adds {
		<-pace.C
		piece := fmt.Sprintf("w%d ", i)
		want.WriteString(piece)
		require.NoError(t, s.Add(t.Context(), piece))
	}
	// Let the last text leave on its own: close would send it at once.
	require.Eventually(t, func() bool { return strings.Join(texts(link.batches()), "") == want.String() }, waitFor, tick)
	require.NoError(t, s.Close())

	bs := link.batches()
	require.Less(t, len(bs), adds, "pieces are batched")
	for i := 1; i < len(bs); i++ {
		// The batcher starts the interval when a send returns, after the
		// link's end stamp, so the gap cannot be shorter on any machine.
		require.GreaterOrEqual(t, bs[i].start.Sub(bs[i-1].end), interval, "batch %d left early", i)
	}
	requireGapFree(t, bs, 1, in)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestBatcherSendsFullBatchEarly(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(1)
	s, beats := startTestBatcher(t, time.Hour, 8, in, link)

	require.NoError(t, s.Add(t.Context(), "a"))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)

	require.NoError(t, s.Add(t.Context(), "0123"))
	require.Equal(t, 1, link.startedCount(), "4 bytes of 8 wait for the interval")
	require.NoError(t, s.Add(t.Context(), "4567"))
	// With an hour's interval, only the size cap sends it.
	require.Eventually(t, func() bool { return link.sentCount() == 2 }, waitFor, tick)

	require.NoError(t, s.Add(t.Context(), "xy"))
	require.Equal(t, 2, link.startedCount())
	require.NoError(t, s.Close())

	bs := link.batches()
	require.Equal(t, []string{"a", "01234567", "xy"}, texts(bs))
	requireGapFree(t, bs, 1, in)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestBatcherWaitsForSendInFlight(t *testing.T) {
	link := &recordingSink{gate: make(chan struct{})}
	in := streamCall(3)
	s, beats := startTestBatcher(t, 10*time.Millisecond, 1<<20, in, link)

	require.NoError(t, s.Add(t.Context(), "first"))
	require.Eventually(t, func() bool { return link.busy() == 1 }, waitFor, tick)

	// The turn is slow to take the first batch; the model goes on, and
	// add does not wait for the network (it would block this test).
	var more strings.Builder
	for i := range 20 {
		piece := fmt.Sprintf(" w%d", i)
		more.WriteString(piece)
		require.NoError(t, s.Add(t.Context(), piece))
	}
	require.Equal(t, 1, link.startedCount(), "no second send while the first is in flight")

	link.gate <- struct{}{} // the first send returns
	require.Eventually(t, func() bool { return link.busy() == 1 && link.startedCount() == 2 }, waitFor, tick)
	link.gate <- struct{}{}
	require.NoError(t, s.Close())

	bs := link.batches()
	require.Equal(t, []string{"first", more.String()}, texts(bs), "what waited goes as one batch")
	require.Equal(t, 1, link.maxInFlight)
	requireGapFree(t, bs, 3, in)
	requireHeartbeats(t, beats.all(), bs, 2)
}

func TestBatcherSlowSendGivesFewerLargerBatches(t *testing.T) {
	link := &recordingSink{delay: 300 * time.Millisecond}
	in := streamCall(1)
	s, beats := startTestBatcher(t, 50*time.Millisecond, 1<<20, in, link)

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
		require.NoError(t, s.Add(t.Context(), piece))
	}
	require.NoError(t, s.Close())

	bs := link.batches()
	require.Equal(t, want.String(), strings.Join(texts(bs), ""))
	require.Equal(t, 1, link.maxInFlight, "never two sends in flight")
	for i := 1; i < len(bs); i++ {
		require.False(t, bs[i].start.Before(bs[i-1].end), "batch %d overlaps the one before", i)
	}
	// Each send takes 300 ms, so 600 ms of text fits in a handful of
	// batches; a third of the pieces leaves ample room for a slow machine.
	require.Less(t, len(bs), adds/3)
	requireGapFree(t, bs, 1, in)
	requireHeartbeats(t, beats.all(), bs, 0)
}

func TestBatcherAbortSendsNothingBuffered(t *testing.T) {
	tests := []struct {
		name string
		hold bool // abort while the first batch is still being sent
	}{
		{name: "text waiting for the interval"},
		{name: "text waiting behind a send in flight", hold: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &recordingSink{}
			if tt.hold {
				link.gate = make(chan struct{})
			}
			s, _ := startTestBatcher(t, time.Hour, 1<<20, streamCall(1), link)

			require.NoError(t, s.Add(t.Context(), "kept"))
			require.Eventually(t, func() bool { return link.startedCount() == 1 }, waitFor, tick)
			require.NoError(t, s.Add(t.Context(), " dropped"))

			aborted := make(chan struct{})
			go func() {
				s.Abort()
				close(aborted)
			}()
			if tt.hold {
				// abort drops the buffer, then waits for the send in flight.
				require.Eventually(t, func() bool { return s.buffered() == 0 }, waitFor, tick)
				link.gate <- struct{}{}
			}
			<-aborted

			require.Equal(t, 1, link.startedCount())
			require.Equal(t, []string{"kept"}, texts(link.batches()))
		})
	}
}

func TestBatcherSendErrorStopsStream(t *testing.T) {
	tests := []struct {
		name   string
		failAt int
	}{
		{name: "first send fails", failAt: 1},
		{name: "a later send fails", failAt: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &recordingSink{failAt: tt.failAt}
			in := streamCall(1)
			s, beats := startTestBatcher(t, 10*time.Millisecond, 1<<20, in, link)

			for i := 1; i < tt.failAt; i++ {
				require.NoError(t, s.Add(t.Context(), "ok "))
				require.Eventually(t, func() bool { return link.sentCount() == i }, waitFor, tick)
			}
			require.NoError(t, s.Add(t.Context(), "lost"))
			// Once the send has failed, add returns its error: the model
			// call stops instead of streaming into the void.
			require.Eventually(t, func() bool { return errors.Is(s.Add(t.Context(), " more"), errTurnGone) }, waitFor, tick)
			require.ErrorIs(t, s.Add(t.Context(), " and more"), errTurnGone)
			require.ErrorIs(t, s.Close(), errTurnGone)

			require.Equal(t, tt.failAt, link.startedCount(), "nothing is sent after a failure")
			bs := link.batches()
			require.Len(t, bs, tt.failAt-1)
			requireGapFree(t, bs, 1, in)
			requireHeartbeats(t, beats.all(), bs, 0)
		})
	}
}

func TestBatcherFencesRetriedAttempt(t *testing.T) {
	const first = 5
	in := streamCall(first)
	token := func(index int64, attempt int) agent.Event {
		return agent.Event{StreamID: in.StreamID, Index: index, Kind: agent.EventToken, Text: "Hi", Step: in.Step, Attempt: attempt}
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
				{StreamID: in.StreamID, Index: 9, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: first, Attempt: 3, Step: in.Step},
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
			link := &recordingSink{headIndex: tt.head, headErr: tt.headErr}
			c := in
			c.Attempt = tt.attempt
			if tt.wantErr != nil {
				ctx, _ := activityContext(t)
				_, err := StartBatcher(ctx, link, c, time.Millisecond, 1<<20)
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, tt.wantHeads, link.heads)
				require.Equal(t, []string{"fence 2", "head"}, link.reads, "fenced before the head is read")
				require.Zero(t, link.startedCount())
				require.Empty(t, link.handedOn, "nothing is published for a call that cannot start")
				return
			}

			s, beats := startTestBatcher(t, 10*time.Millisecond, 1<<20, c, link)
			if tt.want[0].Status == agent.StreamRetrying {
				// The fence goes out at once, before the model's first text.
				require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
				require.Equal(t, tt.want[:1], link.batches()[0].Events)
			}
			require.NoError(t, s.Add(t.Context(), "Hi"))
			require.NoError(t, s.Close())

			bs := link.batches()
			require.Equal(t, tt.want, sentEvents(bs))
			require.Equal(t, tt.wantHeads, link.heads)
			requireGapFree(t, bs, tt.wantFirst, c)
			requireHeartbeats(t, beats.all(), bs, tt.wantFirst-1)
			if tt.attempt == 1 {
				require.Empty(t, link.reads)
				require.False(t, bs[0].first)
				return
			}
			// A retry fences the stream before it reads the head, and its
			// first batch goes live only once the turn is seen to hold it.
			require.Equal(t, []string{fmt.Sprintf("fence %d", tt.attempt), "head"}, link.reads)
			for i, b := range bs {
				require.Equal(t, i == 0, b.first, "batch %d", i)
			}
		})
	}
}

// TestBatcherRetryNotTaken: a retried attempt whose first batch the turn
// did not take (an earlier attempt that still ran got one in at the head
// first) stops streaming: the turn would refuse everything after it.
func TestBatcherRetryNotTaken(t *testing.T) {
	link := &recordingSink{headIndex: 9, notTaken: true}
	c := streamCall(5)
	c.Attempt = 2
	s, _ := startTestBatcher(t, time.Millisecond, 1<<20, c, link)
	require.Eventually(t, func() bool { return errors.Is(s.Add(t.Context(), "Hi"), ErrNotTaken) }, waitFor, tick)
	require.ErrorIs(t, s.Close(), ErrNotTaken)
	require.Empty(t, link.batches())
	require.Equal(t, 1, link.startedCount(), "nothing sent after the RETRYING the turn did not take")
}

// TestBatcherHandsOnFirst: what the turn handed the call is published
// before the call's first batch, so that followers see the log's order.
func TestBatcherHandsOnFirst(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(3)
	in.Live = contract.Live{Events: []agent.Event{{StreamID: in.StreamID, Index: 2, Kind: agent.EventUsage}}}
	s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)
	require.NoError(t, s.Add(t.Context(), "x"))
	require.NoError(t, s.Close())
	require.Equal(t, []string{"x"}, texts(link.batches()))
	link.mu.Lock()
	defer link.mu.Unlock()
	require.Equal(t, []contract.Live{in.Live}, link.handedOn)
	require.Equal(t, 1, link.handedAtFirstSend, "published before the call's first batch")
}

// TestBatcherCloseTail: CloseTail sends nothing of what is buffered and
// returns it as the call's last batch, continuing the batches sent.
func TestBatcherCloseTail(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(4)
	s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)
	require.NoError(t, s.Add(t.Context(), "first"))
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
	require.NoError(t, s.Add(t.Context(), " last"))
	tail, ok, err := s.CloseTail()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, link.startedCount(), "the tail is not sent")
	requireGapFree(t, append(link.batches(), sentBatch{TokenBatch: tail}), 4, in)
	require.Equal(t, " last", tail.Text())
}

// TestRestream: a retried call whose reply an earlier attempt stored
// voids what the log holds of that attempt's events and sends the reply
// whole — its text, then each tool call's arguments — as the batch of its
// result.
func TestRestream(t *testing.T) {
	in := streamCall(5)
	in.Attempt = 2
	calls := []agent.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"2+2"}`}}
	for _, tc := range []struct {
		name    string
		head    int64
		content string
		calls   []agent.ToolCall
		first   int64
		kinds   []agent.EventKind
	}{
		{"the earlier attempt streamed text", 9, "the whole reply", nil, 9, []agent.EventKind{agent.EventStatus, agent.EventToken}},
		{"nothing of it in the log", 5, "the whole reply", nil, 5, []agent.EventKind{agent.EventToken}},
		{"text and a tool call", 9, "Let me add.", calls, 9, []agent.EventKind{agent.EventStatus, agent.EventToken, agent.EventToolArgsDelta}},
		{"a tool call only", 5, "", calls, 5, []agent.EventKind{agent.EventToolArgsDelta}},
		{"nothing but the void", 9, "", nil, 9, []agent.EventKind{agent.EventStatus}},
	} {
		b, ok, err := Restream(t.Context(), &recordingSink{headIndex: tc.head}, in, tc.content, tc.calls)
		require.NoError(t, err, tc.name)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.first, b.First, tc.name)
		require.Equal(t, in.Step, b.Step)
		require.Equal(t, 2, b.Attempt)
		var kinds []agent.EventKind
		for i, e := range b.Events {
			kinds = append(kinds, e.Kind)
			require.Equal(t, b.First+int64(i), e.Index)
			require.Equal(t, in.StreamID, e.StreamID)
			require.NoError(t, e.Validate(), "%s: %s", tc.name, e)
		}
		require.Equal(t, tc.kinds, kinds, tc.name)
		if tc.head > in.First {
			require.Equal(t, agent.StreamRetrying, b.Events[0].Status)
			require.Equal(t, in.First, b.Events[0].VoidFrom)
		}
		require.Equal(t, tc.content, agent.ReplayText(b.Events), tc.name)
		if len(tc.calls) > 0 {
			last := b.Events[len(b.Events)-1]
			require.Equal(t, agent.ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: `{"expression":"2+2"}`}, *last.Tool)
		}
	}
	_, ok, err := Restream(t.Context(), &recordingSink{headIndex: 5}, in, "", nil)
	require.NoError(t, err)
	require.False(t, ok, "no reply to send and nothing to void")
	_, _, err = Restream(t.Context(), &recordingSink{headErr: errTurnGone}, in, "x", nil)
	require.ErrorIs(t, err, errTurnGone)
}

// TestBatcherKeepsTheModelsOrder: reasoning, text and tool-call argument
// fragments become reasoning, token and tool_args_delta events in the
// order the model sent them, a run of one kind (and one call) as one
// event, each stamped with the call's step and attempt; the call's
// arguments are its fragments joined; every kind counts toward the size
// that sends a batch early.
func TestBatcherKeepsTheModelsOrder(t *testing.T) {
	link := &recordingSink{gate: make(chan struct{})}
	in := streamCall(3)
	s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)

	ctx := t.Context()
	// The first fragment leaves at once and is held in flight, so that
	// the rest waits for one batch.
	require.NoError(t, s.AddReasoning(ctx, "The user"))
	require.Eventually(t, func() bool { return link.busy() == 1 }, waitFor, tick)
	require.NoError(t, s.AddReasoning(ctx, " wants "))
	require.NoError(t, s.AddReasoning(ctx, "a sum."))
	require.NoError(t, s.Add(ctx, "Let me "))
	require.NoError(t, s.Add(ctx, "add."))
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", ""))
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", `{"expres`))
	require.NoError(t, s.AddToolArgs(ctx, "call_1", "calculator", `sion": "2+2"}`))
	require.NoError(t, s.AddToolArgs(ctx, "call_2", "calculator", ""))
	require.NoError(t, s.AddToolArgs(ctx, "call_2", "calculator", `{"expression": "3"}`))
	require.NoError(t, s.Add(ctx, ""), "an empty fragment adds nothing")
	require.Equal(t, len(" wants a sum.Let me add.")+len(`{"expression": "2+2"}`)+len(`{"expression": "3"}`), s.buffered(), "what waits, in bytes")
	link.gate <- struct{}{}
	require.Eventually(t, func() bool { return link.sentCount() == 1 }, waitFor, tick)
	close(link.gate) // close sends the rest at once
	require.NoError(t, s.Close())

	bs := link.batches()
	require.Len(t, bs, 2)
	requireGapFree(t, bs, 3, in)
	got := sentEvents(bs)
	tool := func(id, args string) *agent.ToolEvent {
		return &agent.ToolEvent{CallID: id, Name: "calculator", ArgsDelta: args}
	}
	want := []agent.Event{
		{Kind: agent.EventReasoning, Text: "The user"},
		{Kind: agent.EventReasoning, Text: " wants a sum."},
		{Kind: agent.EventToken, Text: "Let me add."},
		{Kind: agent.EventToolArgsDelta, Tool: tool("call_1", `{"expression": "2+2"}`)},
		{Kind: agent.EventToolArgsDelta, Tool: tool("call_2", `{"expression": "3"}`)},
	}
	for i := range want {
		want[i].StreamID, want[i].Index, want[i].Step, want[i].Attempt = in.StreamID, 3+int64(i), in.Step, in.Attempt
		require.NoError(t, got[i].Validate())
	}
	require.Equal(t, want, got)
	require.Equal(t, "Let me add.", agent.ReplayText(got))
	require.Equal(t, "The user wants a sum.", agent.ReplayReasoning(got))

	// Every kind counts toward the size cap: with an hour's interval,
	// only the cap sends these.
	link2 := &recordingSink{}
	s2, _ := startTestBatcher(t, time.Hour, 8, streamCall(1), link2)
	require.NoError(t, s2.AddReasoning(ctx, "a"))
	require.Eventually(t, func() bool { return link2.sentCount() == 1 }, waitFor, tick)
	require.NoError(t, s2.AddToolArgs(ctx, "c", "t", "0123"))
	require.Equal(t, 1, link2.startedCount(), "4 bytes of 8 wait for the interval")
	require.NoError(t, s2.AddReasoning(ctx, "4567"))
	require.Eventually(t, func() bool { return link2.sentCount() == 2 }, waitFor, tick)
	require.NoError(t, s2.Close())
}

// heartbeatRecorder is a worker interceptor that records every
// activity.RecordHeartbeat. The SDK sends an activity's first heartbeat
// at once and batches the later ones over a throttle window (30 s without
// a heartbeat timeout, as in TestActivityEnvironment), so the
// environment's heartbeat listener sees only the first: the interceptor
// sees every heartbeat the activity reports.
type heartbeatRecorder struct {
	interceptor.WorkerInterceptorBase

	mu    sync.Mutex
	beats []int64
}

func (r *heartbeatRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heartbeatInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, r: r}
}

// all returns the heartbeats so far, in order.
func (r *heartbeatRecorder) all() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.beats...)
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	r *heartbeatRecorder
}

func (i *heartbeatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&heartbeatOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}, r: i.r})
}

type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	r *heartbeatRecorder
}

func (o *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) == 1 {
		if index, ok := details[0].(int64); ok {
			o.r.mu.Lock()
			o.r.beats = append(o.r.beats, index)
			o.r.mu.Unlock()
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// activityContext runs an activity that holds until the test ends and
// returns its context: the batcher heartbeats, which needs one. The test
// itself stays on its own goroutine.
func activityContext(t *testing.T) (context.Context, *heartbeatRecorder) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	beats := &heartbeatRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{beats}})
	started := make(chan context.Context)
	release := make(chan struct{})
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		started <- ctx
		<-release
		return nil
	}, activity.RegisterOptions{Name: "Hold"})
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity("Hold")
		done <- err
	}()
	ctx := <-started
	t.Cleanup(func() {
		close(release)
		require.NoError(t, <-done)
	})
	return ctx, beats
}

// TestBatcherLiveFirst: a live-first call appends its batches to the live
// path instead of sending them to the turn, CloseTail appends what was
// still buffered and returns all of them — the log takes the call at
// once — and says how far the live path has it: to its end, so that a
// call run again after its workflow task was lost finds the whole reply
// there (Shown).
func TestBatcherLiveFirst(t *testing.T) {
	link := &recordingSink{}
	in := streamCall(4)
	in.LiveFirst = true
	s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)
	require.NoError(t, s.Add(t.Context(), "first"))
	require.Eventually(t, func() bool { return link.startedCount() == 1 }, waitFor, tick)
	require.NoError(t, s.AddToolArgs(t.Context(), "c1", "calculator", `{"x":1}`))
	tail, ok, err := s.CloseTail()
	require.NoError(t, err)
	require.True(t, ok)

	require.Zero(t, link.sentCount(), "nothing is signalled")
	link.mu.Lock()
	appended := slices.Clone(link.appended)
	link.mu.Unlock()
	require.Len(t, appended, 2, "the buffered arguments are appended at the close")
	require.Equal(t, []bool{false, true}, link.held,
		"the first append claims the stream; the next only continues the attempt's own claim")
	require.Equal(t, "first", appended[0].Text())
	require.Equal(t, []int64{5}, indices(appended[1].Events))
	require.Equal(t, int64(4), tail.First)
	require.Equal(t, []int64{4, 5}, indices(tail.Events))
	require.Equal(t, "first", tail.Text())
	require.Equal(t, `{"x":1}`, tail.Events[1].Tool.ArgsDelta)
	require.Equal(t, int64(5), s.Published())
	requireGapFree(t, []sentBatch{{TokenBatch: tail}}, 4, in)
}

// TestBatcherLiveFirstRetry: a retried live-first attempt claims the
// stream, carries what earlier attempts appended at the head of its
// result's batch, and voids it with a RETRYING it appends at once.
func TestBatcherLiveFirstRetry(t *testing.T) {
	const first = 5
	in := streamCall(first)
	in.LiveFirst, in.Attempt = true, 2
	earlier := agent.Event{StreamID: in.StreamID, Index: first, Kind: agent.EventToken, Text: "Hel", Step: in.Step, Attempt: 1}
	for _, tc := range []struct {
		name    string
		head    int64
		stored  []agent.Event
		want    []agent.EventKind
		first   int64
		claimed bool
	}{
		{"an earlier attempt appended text", first, []agent.Event{earlier}, []agent.EventKind{agent.EventToken, agent.EventStatus, agent.EventToken}, first, true},
		{"nothing was appended", first, nil, []agent.EventKind{agent.EventToken}, first, true},
		{"an earlier attempt signalled text", first + 2, nil, []agent.EventKind{agent.EventStatus, agent.EventToken}, first + 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := &recordingSink{headIndex: tc.head, stored: tc.stored}
			s, _ := startTestBatcher(t, time.Hour, 1<<20, in, link)
			voids := len(tc.want) > 1
			if voids {
				// The RETRYING goes out at once, before the model's text.
				require.Eventually(t, func() bool { return link.startedCount() == 1 }, waitFor, tick)
			}
			require.NoError(t, s.Add(t.Context(), "Hello"))
			tail, ok, err := s.CloseTail()
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, []int{2}, link.claims)
			require.NotContains(t, link.held, false, "the attempt claimed the stream: its appends only continue the claim")
			require.Equal(t, tc.first, tail.First)
			var kinds []agent.EventKind
			for i, e := range tail.Events {
				kinds = append(kinds, e.Kind)
				require.Equal(t, tc.first+int64(i), e.Index)
			}
			require.Equal(t, tc.want, kinds)
			if len(tc.stored) > 0 {
				require.Equal(t, tc.stored, tail.Events[:len(tc.stored)], "what earlier attempts appended comes first, as it was")
			}
			if voids {
				retry := tail.Events[len(tail.Events)-2]
				require.Equal(t, agent.StreamRetrying, retry.Status)
				require.Equal(t, int64(first), retry.VoidFrom)
			}
			require.Equal(t, tail.Events[len(tail.Events)-1].Index, s.Published(), "the whole reply is on the live path")
			require.Equal(t, "Hello", agent.ReplayText(tail.Events))
		})
	}

	t.Run("a local call claims from its first index, asking the turn nothing", func(t *testing.T) {
		// The turn runs the call inside its workflow task: its log takes
		// nothing meanwhile, and a query would wait for the call to end.
		local := in
		local.Local = true
		link := &recordingSink{headIndex: first + 2, stored: []agent.Event{earlier}}
		s, _ := startTestBatcher(t, time.Hour, 1<<20, local, link)
		require.NoError(t, s.Add(t.Context(), "Hello"))
		tail, ok, err := s.CloseTail()
		require.NoError(t, err)
		require.True(t, ok)
		require.Zero(t, link.heads)
		require.Equal(t, []int{2}, link.claims)
		require.Equal(t, int64(first), tail.First)
		require.Equal(t, earlier, tail.Events[0], "what the lost run appended comes first, voided")
		require.Equal(t, agent.StreamRetrying, tail.Events[1].Status)
		require.Equal(t, "Hello", agent.ReplayText(tail.Events))
	})

	t.Run("a newer attempt has claimed the stream", func(t *testing.T) {
		link := &recordingSink{headIndex: first, claimErr: ErrFenced}
		ctx, _ := activityContext(t)
		_, err := StartBatcher(ctx, link, in, time.Millisecond, 1<<20)
		require.ErrorIs(t, err, ErrFenced)
		require.Empty(t, link.handedOn, "nothing is published for a call that cannot start")
	})
}

// TestRestreamLiveFirst: a live-first retry that finds the reply stored
// appends the reply after what earlier attempts appended, voided.
func TestRestreamLiveFirst(t *testing.T) {
	in := streamCall(5)
	in.LiveFirst, in.Attempt = true, 2
	link := &recordingSink{headIndex: 5, stored: []agent.Event{{StreamID: in.StreamID, Index: 5, Kind: agent.EventToken, Text: "the wh", Step: in.Step, Attempt: 1}}}
	b, ok, err := Restream(t.Context(), link, in, "the whole reply", nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{5, 6, 7}, indices(b.Events))
	require.Equal(t, agent.StreamRetrying, b.Events[1].Status)
	require.Equal(t, "the whole reply", agent.ReplayText(b.Events))
	require.Len(t, link.appended, 1)
	require.Equal(t, []int64{6, 7}, indices(link.appended[0].Events), "the replacement is appended")
	require.Equal(t, []bool{true}, link.held, "after the claim")
}

// TestBatcherLiveFirstOutage: an append the live path cannot store (its
// database away) stops nothing: the events go with the next append, and
// the call's result holds them all; being fenced off stops the call.
func TestBatcherLiveFirstOutage(t *testing.T) {
	in := streamCall(1)
	in.LiveFirst = true
	link := &recordingSink{failAt: 1}
	s, _ := startTestBatcher(t, 5*time.Millisecond, 1<<20, in, link)
	require.NoError(t, s.Add(t.Context(), "a"))
	require.Eventually(t, func() bool { return link.startedCount() == 1 }, waitFor, tick)
	require.NoError(t, s.Add(t.Context(), "b"))
	require.Eventually(t, func() bool { return link.startedCount() >= 2 }, waitFor, tick)
	tail, ok, err := s.CloseTail()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ab", tail.Text())
	link.mu.Lock()
	require.Len(t, link.appended, 1)
	require.Equal(t, "ab", link.appended[0].Text(), "what failed went with the next append")
	require.Equal(t, []bool{false, false}, link.held[:2], "an append that failed claimed nothing: the next claims")
	link.mu.Unlock()
	require.Equal(t, tail.Events[len(tail.Events)-1].Index, s.Published())

	fenced := &fencingSink{recordingSink: &recordingSink{}}
	s, _ = startTestBatcher(t, 5*time.Millisecond, 1<<20, in, fenced)
	require.NoError(t, s.Add(t.Context(), "a"))
	require.Eventually(t, func() bool { return errors.Is(s.Add(t.Context(), "b"), ErrFenced) }, waitFor, tick)
	_, _, err = s.CloseTail()
	require.ErrorIs(t, err, ErrFenced)
}

// fencingSink refuses every append: a newer attempt owns the stream.
type fencingSink struct{ *recordingSink }

func (fencingSink) Append(context.Context, agent.TokenBatch, bool) error { return ErrFenced }

// TestBehind: a live-first call run again with its reply stored takes
// what its step showed, at the indices followers hold, and stops at the
// next step's events; what does not show the whole reply is voided and
// followed by the reply.
func TestBehind(t *testing.T) {
	c := streamCall(5)
	ev := func(i int64, step, attempt int, kind agent.EventKind, text string) agent.Event {
		e := agent.Event{StreamID: c.StreamID, Index: i, Kind: kind, Text: text, Step: step, Attempt: attempt}
		if kind == agent.EventToolArgsDelta {
			e.Text, e.Tool = "", &agent.ToolEvent{CallID: "c1", Name: "calculator", ArgsDelta: text}
		}
		return e
	}
	calls := []agent.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"x":1}`}}
	for _, tc := range []struct {
		name     string
		stored   []agent.Event
		content  string
		calls    []agent.ToolCall
		shown    int
		kinds    []agent.EventKind
		live     int64
		attempt  int
		replayed bool
	}{
		{name: "the whole reply, then the turn's events and the next step's",
			stored: []agent.Event{ev(5, 2, 1, agent.EventToken, "Hel"), ev(6, 2, 1, agent.EventToken, "lo"),
				ev(7, 2, 1, agent.EventToolArgsDelta, `{"x":1}`), {StreamID: c.StreamID, Index: 8, Kind: agent.EventStepFinish, Step: 2},
				ev(12, 4, 1, agent.EventToken, "next")},
			content: "Hello", calls: calls, shown: 3,
			kinds: []agent.EventKind{agent.EventToken, agent.EventToken, agent.EventToolArgsDelta}, live: 7, attempt: 1},
		{name: "an attempt voided by the next",
			stored: []agent.Event{ev(5, 2, 1, agent.EventToken, "Hi"),
				{StreamID: c.StreamID, Index: 6, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 5, Step: 2, Attempt: 2},
				ev(7, 2, 2, agent.EventToken, "Hello")},
			content: "Hello", shown: 3,
			kinds: []agent.EventKind{agent.EventToken, agent.EventStatus, agent.EventToken}, live: 7, attempt: 2},
		{name: "a part of the reply",
			stored: []agent.Event{ev(5, 2, 1, agent.EventToken, "Hel")}, content: "Hello", shown: 1,
			kinds: []agent.EventKind{agent.EventToken, agent.EventStatus, agent.EventToken}, live: 5, attempt: 1, replayed: true},
		{name: "nothing stored",
			content: "Hello", kinds: []agent.EventKind{agent.EventToken}, live: 0, attempt: 1, replayed: true},
		{name: "a gap", stored: []agent.Event{ev(6, 2, 1, agent.EventToken, "Hello")},
			content: "Hello", kinds: []agent.EventKind{agent.EventToken}, live: 0, attempt: 1, replayed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := &recordingSink{stored: tc.stored}
			shown, err := Shown(t.Context(), link, c)
			require.NoError(t, err)
			require.Len(t, shown, tc.shown)
			require.Equal(t, !tc.replayed, ShowsReply(shown, tc.content, tc.calls))
			b, live, ok := Behind(c, shown, tc.content, tc.calls)
			require.True(t, ok)
			require.Equal(t, tc.live, live)
			require.Equal(t, c.First, b.First)
			require.Equal(t, tc.attempt, b.Attempt)
			var kinds []agent.EventKind
			for i, e := range b.Events {
				kinds = append(kinds, e.Kind)
				require.Equal(t, c.First+int64(i), e.Index)
			}
			require.Equal(t, tc.kinds, kinds)
			if tc.shown > 0 {
				require.Equal(t, tc.stored[:tc.shown], b.Events[:tc.shown], "what was shown comes first, as it was")
			}
			require.Equal(t, tc.content, agent.ReplayText(b.Events))
			require.Empty(t, link.claims, "nothing is claimed")
			require.Empty(t, link.appended, "nothing is appended")
		})
	}
}
