package eventlog_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const waitFor = 10 * time.Second

// logWorkflow is a turn reduced to its event log: the test appends events
// with the "append" signal, as a turn would log them, and the workflow
// ends when the test sends no events (or terminates it), so that when it
// closes is the test's choice — returning the log's tail, as a turn does,
// when the test sent "tail" first. Followers read it with the events
// query, as they read a turn's. The "hold" signal makes it run the local
// activity "Hold" (holder), which holds its workflow task until the test
// releases it, as a local model call holds a turn's.
func logWorkflow(ctx workflow.Context) (agent.TurnResult, error) {
	l := eventlog.New(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if err := l.Register(ctx, "demo"); err != nil {
		return agent.TurnResult{}, err
	}
	ch := workflow.GetSignalChannel(ctx, "append")
	tail := workflow.GetSignalChannel(ctx, "tail")
	hold := workflow.GetSignalChannel(ctx, "hold")
	for {
		var evs []agent.Event
		held := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &evs) })
		sel.AddReceive(hold, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); held = true })
		sel.Select(ctx)
		if held {
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
			if err := workflow.ExecuteLocalActivity(lctx, "Hold").Get(ctx, nil); err != nil {
				return agent.TurnResult{}, err
			}
			continue
		}
		if len(evs) == 0 {
			var res agent.TurnResult
			if tail.ReceiveAsync(nil) {
				res.StreamTail = l.Tail(true)
			}
			return res, nil
		}
		for _, e := range evs {
			l.Append(e)
		}
	}
}

// callWorkflow is a turn reduced to one streamed model call, step 1, that
// signals its batches (a Conversation's turn, whose parent logs its
// tokens): its log takes them as a turn's does (Log.Accept: the step in
// flight, an attempt no older than one seen, the log's next index), and
// the "append" signal logs the turn's own events after them. It ends when
// "append" brings nothing.
func callWorkflow(ctx workflow.Context) error {
	l := eventlog.New(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if err := l.Register(ctx, "demo"); err != nil {
		return err
	}
	l.OpenStep(1)
	ch := workflow.GetSignalChannel(ctx, "append")
	for {
		var evs []agent.Event
		appended := false
		sel := workflow.NewSelector(ctx)
		l.ReceiveBatches(ctx, sel)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &evs); appended = true })
		sel.Select(ctx)
		if !appended {
			continue
		}
		if len(evs) == 0 {
			return nil
		}
		l.TakeBatches(ctx)
		l.CloseStep()
		for _, e := range evs {
			l.Append(e)
		}
	}
}

// queryCounter counts the queries a follower makes through the real
// client: its reads of the log.
type queryCounter struct {
	client.Client
	queries atomic.Int32
	// slow, when set, holds each query this long first, as a loaded
	// server does.
	slow atomic.Int64
}

func (c *queryCounter) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	c.queries.Add(1)
	time.Sleep(time.Duration(c.slow.Load()))
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

// holder is the local activity "Hold": it tells started, then holds its
// workflow task until release is closed.
type holder struct {
	started chan struct{}
	release chan struct{}
}

func (h *holder) hold(ctx context.Context) error {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// followEnv is a worker running logWorkflow on the test's own task queue,
// the live path on the test's own database, and a follower of both whose
// reads are counted. The follower never reads the log for want of news
// (idle reads an hour apart), so every read a test sees has a reason.
type followEnv struct {
	t        *testing.T
	c        client.Client
	queue    string
	hub      *pglive.Hub
	pub      *pglive.Publisher
	pool     *pgxpool.Pool
	counter  *queryCounter
	follower *eventlog.Follower
	holder   *holder
}

func newFollowEnv(t *testing.T) *followEnv {
	t.Helper()
	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := "eventlog-" + randomID()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(logWorkflow, workflow.RegisterOptions{Name: "EventLogTest"})
	w.RegisterWorkflowWithOptions(callWorkflow, workflow.RegisterOptions{Name: "EventLogCallTest"})
	h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
	w.RegisterActivityWithOptions(h.hold, activity.RegisterOptions{Name: "Hold"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	pool := st.Pool()
	hub := pglive.NewHub(pool, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		st.Close()
	})
	require.Eventually(t, hub.Connected, waitFor, 5*time.Millisecond)
	counter := &queryCounter{Client: c}
	return &followEnv{t: t, c: c, queue: queue, hub: hub, pub: pglive.NewPublisher(pool), pool: pool, counter: counter,
		follower: eventlog.NewFollower(counter, hub, quiet(), time.Hour), holder: h}
}

func quiet() tlog.Logger { return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start starts a log whose stream is a turn's of tenant demo.
func (e *followEnv) start() (streamID, runID string) {
	e.t.Helper()
	return e.startWorkflow("EventLogTest")
}

// startWorkflow starts a workflow of the test's whose stream is a turn's
// of tenant demo.
func (e *followEnv) startWorkflow(name string) (streamID, runID string) {
	e.t.Helper()
	id := contract.TurnWorkflowID("demo", "job-"+randomID())
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: e.queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(contract.SearchTenant.ValueSet("demo"))}, name)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = e.c.TerminateWorkflow(context.Background(), id, "", "test over") })
	return id, run.GetRunID()
}

// log appends events to the stream's log, as the turn does, and waits
// until the log holds them. It reads the log with its own client: the
// follower's reads are counted.
func (e *followEnv) log(streamID string, evs ...agent.Event) {
	e.t.Helper()
	require.NoError(e.t, e.c.SignalWorkflow(context.Background(), streamID, "", "append", evs))
	want := evs[len(evs)-1].Index + 1
	require.Eventually(e.t, func() bool {
		p, err := turnclient.Events(context.Background(), e.c, streamID, agent.EventsQuery{HeadOnly: true})
		return err == nil && p.Next == want
	}, waitFor, 10*time.Millisecond)
}

// publish sends events on the live path, as an activity does once the
// turn holds them.
func (e *followEnv) publish(streamID string, evs ...agent.Event) {
	e.t.Helper()
	require.NoError(e.t, e.pub.Publish(context.Background(), agent.TokenBatch{StreamID: streamID, First: evs[0].Index, Events: evs}))
}

// following is a follower at work on its own goroutine; the test reads
// what it delivered from got.
type following struct {
	got  chan agent.Event
	done chan error
}

func (e *followEnv) follow(ctx context.Context, streamID string, after int64) *following {
	f := &following{got: make(chan agent.Event, 100), done: make(chan error, 1)}
	go func() {
		f.done <- e.follower.Follow(ctx, streamID, after, func(ev agent.Event) error {
			f.got <- ev
			return nil
		})
	}()
	return f
}

// next returns the next n events delivered.
func (f *following) next(t *testing.T, n int) []agent.Event {
	t.Helper()
	var out []agent.Event
	for range n {
		select {
		case ev := <-f.got:
			out = append(out, ev)
		case err := <-f.done:
			// What it delivered before it returned comes first.
			select {
			case ev := <-f.got:
				out = append(out, ev)
				f.done <- err
				continue
			default:
			}
			t.Fatalf("following ended after %d of %d events: %v", len(out), n, err)
		case <-time.After(waitFor):
			t.Fatalf("%d of %d events delivered", len(out), n)
		}
	}
	return out
}

// end waits for the follower to return, with nothing more delivered.
func (f *following) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		require.Empty(t, f.got, "delivered after the end")
		return err
	case <-time.After(waitFor):
		t.Fatal("following did not end")
		return nil
	}
}

func ev(streamID string, index int64, kind agent.EventKind, text string) agent.Event {
	e := agent.Event{StreamID: streamID, Index: index, Kind: kind, Text: text}
	if kind == agent.EventStatus {
		e.Text, e.Status = "", text
	}
	return e
}

func requireIndices(t *testing.T, evs []agent.Event, from, to int64) {
	t.Helper()
	var got []int64
	for _, e := range evs {
		got = append(got, e.Index)
	}
	var want []int64
	for i := from; i <= to; i++ {
		want = append(want, i)
	}
	require.Equal(t, want, got)
}

// TestFollowCatchesUpThenFollowsLive: a follower of a running turn reads
// what the log holds once, then takes what follows from the live path
// without reading the log again, to the terminal event.
func TestFollowCatchesUpThenFollowsLive(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventToken, "a"), ev(id, 3, agent.EventToken, "b"))

	f := e.follow(ctx, id, 0)
	requireIndices(t, f.next(t, 3), 1, 3)
	require.Equal(t, int32(1), e.counter.queries.Load(), "one read to catch up")

	live := []agent.Event{ev(id, 4, agent.EventToken, "c"), ev(id, 5, agent.EventToken, "d")}
	e.log(id, live...)
	e.publish(id, live...)
	require.Equal(t, live, f.next(t, 2))
	end := ev(id, 6, agent.EventStatus, agent.StreamCompleted)
	e.publish(id, end)
	require.Equal(t, end, f.next(t, 1)[0])
	require.NoError(t, f.end(t))
	require.Equal(t, int32(1), e.counter.queries.Load(), "the live events were not read from the log")
}

// TestFollowReadsCallInFlight: a follower that joins while a live-first
// model call streams reads the log, then what the call has appended past
// it, and follows the call live; a lost notification is read back from
// the stored batches, though the log does not hold them yet. Once the
// turn logs the call whole, nothing is delivered twice.
func TestFollowReadsCallInFlight(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventStepStart, ""))
	call := func(evs ...agent.Event) agent.TokenBatch {
		for i := range evs {
			evs[i].Step, evs[i].Attempt = 1, 1
		}
		return agent.TokenBatch{StreamID: id, Step: 1, Attempt: 1, First: evs[0].Index, Events: evs}
	}
	require.NoError(t, e.pub.Append(ctx, call(ev(id, 3, agent.EventToken, "Hel"), ev(id, 4, agent.EventToken, "lo")), false))

	f := e.follow(ctx, id, 0)
	requireIndices(t, f.next(t, 4), 1, 4)
	require.Equal(t, int32(1), e.counter.queries.Load(), "one read of the log; the rest was stored")

	// 5 is stored, but its notification is lost: 6 comes after a gap.
	lost, err := json.Marshal(call(ev(id, 5, agent.EventToken, " wor")).Events)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO live_batches (stream_id, first, last, events) VALUES ($1, 5, 5, $2)`, id, lost)
	require.NoError(t, err)
	require.NoError(t, e.pub.Append(ctx, call(ev(id, 6, agent.EventToken, "ld")), true))
	got := f.next(t, 2)
	requireIndices(t, got, 5, 6)
	require.Equal(t, " world", got[0].Text+got[1].Text)

	// The call ends: the turn logs all of it with its result, and the
	// events after it reach the follower live.
	all := []agent.Event{ev(id, 3, agent.EventToken, "Hel"), ev(id, 4, agent.EventToken, "lo"), ev(id, 5, agent.EventToken, " wor"), ev(id, 6, agent.EventToken, "ld")}
	e.log(id, all...)
	e.publish(id, append(all[2:], ev(id, 7, agent.EventStatus, agent.StreamCompleted))...)
	require.Equal(t, int64(7), f.next(t, 1)[0].Index, "nothing twice")
	require.NoError(t, f.end(t))
}

// TestFollowSharesReads: followers that open a stream at the same moment
// from the same index share one read of its log, and each gets every
// event; one whose context ends stops waiting without ending the others'.
func TestFollowSharesReads(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventToken, "a"))
	e.counter.slow.Store(int64(300 * time.Millisecond))

	gone, leave := context.WithCancel(ctx)
	left := e.follow(gone, id, 0)
	var fs []*following
	for range 20 {
		fs = append(fs, e.follow(ctx, id, 0))
	}
	leave()
	require.ErrorIs(t, left.end(t), context.Canceled)
	for _, f := range fs {
		requireIndices(t, f.next(t, 2), 1, 2)
	}
	require.Less(t, e.counter.queries.Load(), int32(5), "21 followers, one read of the log (a few at most, by timing)")
}

// TestFollowFillsGapFromLog: a live batch that does not continue what the
// client has (notifications lost) makes the follower read the gap from
// the log; the batch's events are delivered once, in order, and a late
// repeat of them is not delivered again.
func TestFollowFillsGapFromLog(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventToken, "a"))
	f := e.follow(ctx, id, 0)
	requireIndices(t, f.next(t, 2), 1, 2)

	e.log(id, ev(id, 3, agent.EventToken, "b"), ev(id, 4, agent.EventToken, "c"), ev(id, 5, agent.EventToken, "d"))
	e.publish(id, ev(id, 5, agent.EventToken, "d")) // 3 and 4 were never published
	got := f.next(t, 3)
	requireIndices(t, got, 3, 5)
	require.Equal(t, "abcd", "a"+got[0].Text+got[1].Text+got[2].Text)
	require.Equal(t, int32(2), e.counter.queries.Load(), "one read to catch up, one for the gap")

	e.publish(id, ev(id, 4, agent.EventToken, "c"), ev(id, 5, agent.EventToken, "d")) // late
	e.publish(id, ev(id, 6, agent.EventStatus, agent.StreamCompleted))
	require.Equal(t, int64(6), f.next(t, 1)[0].Index, "the late batch is not delivered again")
	require.NoError(t, f.end(t))
}

// TestFollowReadsLogAfterReconnect: notifications lost while the
// listener reconnects are read from the log once it is back; without the
// reconnect the follower would wait for its next idle read, an hour away.
func TestFollowReadsLogAfterReconnect(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
	f := e.follow(ctx, id, 0)
	requireIndices(t, f.next(t, 1), 1, 1)

	// Logged while their notifications are lost with the listener.
	e.log(id, ev(id, 2, agent.EventToken, "a"), ev(id, 3, agent.EventToken, "b"))
	var killed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'LISTEN '||$1`, pglive.Channel).Scan(&killed))
	require.Equal(t, 1, killed)
	requireIndices(t, f.next(t, 2), 2, 3)

	// The live path works again once the listener is back: the end is
	// published and never logged, so only the live path can bring it (the
	// reconnect's own read of the log may come before or after it).
	require.Eventually(t, e.hub.Connected, waitFor, 5*time.Millisecond)
	end := ev(id, 4, agent.EventStatus, agent.StreamCompleted)
	e.publish(id, end)
	require.Equal(t, end, f.next(t, 1)[0], "the end came live")
	require.NoError(t, f.end(t))
}

// TestFollowNewNeedsNoRead: a follower of a turn it starts subscribes
// first, so that when the live path carries every event it never reads
// the log at all.
func TestFollowNewNeedsNoRead(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []agent.Event
	id := contract.TurnWorkflowID("demo", "job-"+randomID())
	err := e.follower.FollowNew(ctx, id, func() (string, error) {
		run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.queue}, "EventLogTest")
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { _ = e.c.TerminateWorkflow(context.Background(), id, "", "test over") })
		evs := []agent.Event{ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventToken, "hi"), ev(id, 3, agent.EventStatus, agent.StreamCompleted)}
		if err := e.c.SignalWorkflow(ctx, id, "", "append", evs); err != nil {
			return "", err
		}
		if err := e.pub.Publish(ctx, agent.TokenBatch{StreamID: id, First: 1, Events: evs}); err != nil {
			return "", err
		}
		return run.GetRunID(), nil
	}, func(ev agent.Event) error {
		got = append(got, ev)
		return nil
	})
	require.NoError(t, err)
	requireIndices(t, got, 1, 3)
	require.Equal(t, int32(0), e.counter.queries.Load(), "nothing read from the log")
}

// TestFollowEnds: the ways following ends other than the terminal event.
func TestFollowEnds(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("the workflow closes: a last read delivers the end", func(t *testing.T) {
		id, _ := e.start()
		e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
		f := e.follow(ctx, id, 0)
		requireIndices(t, f.next(t, 1), 1, 1)
		// Logged, never published: only the close makes the follower read.
		e.log(id, ev(id, 2, agent.EventToken, "a"), ev(id, 3, agent.EventStatus, agent.StreamCompleted))
		require.NoError(t, e.c.SignalWorkflow(ctx, id, "", "append", []agent.Event{}))
		requireIndices(t, f.next(t, 2), 2, 3)
		require.NoError(t, f.end(t))
	})
	t.Run("the workflow closes with its tail: nothing is read", func(t *testing.T) {
		id, _ := e.start()
		e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
		f := e.follow(ctx, id, 0)
		requireIndices(t, f.next(t, 1), 1, 1)
		before := e.counter.queries.Load()
		e.log(id, ev(id, 2, agent.EventToken, "a"), ev(id, 3, agent.EventStatus, agent.StreamCompleted))
		require.NoError(t, e.c.SignalWorkflow(ctx, id, "", "tail", nil))
		require.NoError(t, e.c.SignalWorkflow(ctx, id, "", "append", []agent.Event{}))
		requireIndices(t, f.next(t, 2), 2, 3)
		require.NoError(t, f.end(t))
		require.Equal(t, before, e.counter.queries.Load(), "the close carried the end of the log")
	})
	t.Run("the workflow ends without a final status", func(t *testing.T) {
		id, _ := e.start()
		e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
		f := e.follow(ctx, id, 0)
		requireIndices(t, f.next(t, 1), 1, 1)
		require.NoError(t, e.c.TerminateWorkflow(ctx, id, "", "gone"))
		err := f.end(t)
		require.True(t, agent.IsCode(err, agent.CodeUnavailable), "%v", err)
	})
	t.Run("resuming past the end", func(t *testing.T) {
		id, _ := e.start()
		e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
		err := e.follow(ctx, id, 5).end(t)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	})
	t.Run("a stream that does not exist", func(t *testing.T) {
		err := e.follow(ctx, contract.TurnWorkflowID("demo", "no-such-job"), 0).end(t)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	})
	t.Run("a workflow of another tenant than its id names", func(t *testing.T) {
		// The log answers as tenant demo; an id that names another
		// tenant is not that tenant's stream.
		id := contract.TurnWorkflowID("other", "job-"+randomID())
		_, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.queue}, "EventLogTest")
		require.NoError(t, err)
		defer func() { _ = e.c.TerminateWorkflow(context.Background(), id, "", "test over") }()
		err = e.follow(ctx, id, 0).end(t)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	})
	t.Run("the client's context", func(t *testing.T) {
		id, _ := e.start()
		e.log(id, ev(id, 1, agent.EventStatus, agent.StreamRunning))
		cctx, ccancel := context.WithCancel(ctx)
		f := e.follow(cctx, id, 0)
		requireIndices(t, f.next(t, 1), 1, 1)
		ccancel()
		require.ErrorIs(t, f.end(t), context.Canceled)
	})
}

// TestFollowTwoAttemptsOfASignalledCall: a signalled model call's attempt
// that the turn has given up on (its heartbeat timed out: it waited on the
// log's head, or its worker was slow) runs on beside the retry, and both
// stream the answer, each cut into batches its own way. The turn takes
// one attempt's batches at each index and refuses the other's. Were those
// published too, a follower would take some indices from one cut and the
// rest from the other, and skip or repeat text: two attempts that read
// the same head showed "17 * 3 = 51 and that is the is the answer", with
// " answer and that" lost between the cuts. A retry fences the stream
// before it reads the head and publishes its first batch only once the
// turn has taken it; the follower is shown only what the log holds.
func TestFollowTwoAttemptsOfASignalledCall(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const answer = "17 * 3 = 51 and that is the answer and that is the answer"
	// start starts a turn whose model call, step 1, shows its follower
	// "17 * 3" in its first attempt, which is then lost.
	start := func(t *testing.T) signalledCall {
		id, _ := e.startWorkflow("EventLogCallTest")
		c := signalledCall{id: id, sinks: eventlog.Sinks{Temporal: e.c, Live: e.pub, Logger: quiet()}, f: e.follow(ctx, id, 0)}
		require.NoError(t, c.sinks.Send(ctx, c.batch(1, ev(id, 1, agent.EventToken, "17 * 3"))))
		requireIndices(t, c.f.next(t, 1), 1, 1)
		return c
	}
	// ends ends the turn at index end and checks that the follower, which
	// was shown shown, showed the log's events, and the answer.
	ends := func(t *testing.T, c signalledCall, shown []agent.Event, end int64) {
		last := ev(c.id, end, agent.EventStatus, agent.StreamCompleted)
		require.NoError(t, e.c.SignalWorkflow(ctx, c.id, "", "append", []agent.Event{last}))
		e.publish(c.id, last)
		shown = append(shown, c.f.next(t, int(end-shown[len(shown)-1].Index))...)
		require.NoError(t, c.f.end(t))
		logged, err := turnclient.Events(ctx, e.c, c.id, agent.EventsQuery{AfterIndex: 1})
		require.NoError(t, err)
		require.Equal(t, answer, agent.ReplayText(logged.Events))
		require.Equal(t, logged.Events, shown, "the follower shows what the log holds")
	}

	t.Run("two attempts read the same head; the retry's batch is taken", func(t *testing.T) {
		c := start(t)
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 2))
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 3))
		require.NoError(t, c.sinks.SendFirst(ctx, c.batch(3, c.retrying(2))))
		shown := c.f.next(t, 1)
		err := c.sinks.SendFirst(ctx, c.batch(2, c.retrying(2), ev(c.id, 3, agent.EventToken, "17 * 3 = 51 and that is the")))
		require.ErrorIs(t, err, eventlog.ErrNotTaken)
		require.NoError(t, c.sinks.Send(ctx, c.batch(3, ev(c.id, 3, agent.EventToken, "17 * 3 = 51 and that is the answer and that"))))
		require.NoError(t, c.sinks.Send(ctx, c.batch(3, ev(c.id, 4, agent.EventToken, " is the answer"))))
		ends(t, c, shown, 5)
	})

	t.Run("two attempts read the same head; the older one's batch is taken", func(t *testing.T) {
		c := start(t)
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 2))
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 3))
		// The turn takes attempt 2's batch, which the fence keeps off the
		// live path, and refuses attempt 3's; attempt 4 reads the head
		// past attempt 2's batch and voids it.
		err := c.sinks.SendFirst(ctx, c.batch(2, c.retrying(2), ev(c.id, 3, agent.EventToken, "17 * 3 = 51 and that is the")))
		require.ErrorIs(t, err, eventlog.ErrFenced)
		require.ErrorIs(t, c.sinks.SendFirst(ctx, c.batch(3, c.retrying(2))), eventlog.ErrNotTaken)
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 4))
		require.NoError(t, c.sinks.SendFirst(ctx, c.batch(4, c.retrying(4))))
		require.NoError(t, c.sinks.Send(ctx, c.batch(4, ev(c.id, 5, agent.EventToken, "17 * 3 = 51 and that is the answer and that"))))
		require.NoError(t, c.sinks.Send(ctx, c.batch(4, ev(c.id, 6, agent.EventToken, " is the answer"))))
		// Attempt 2's batch the follower read from the log.
		ends(t, c, c.f.next(t, 1), 7)
	})

	t.Run("an attempt the turn gave up on streams on after the retry's first batch", func(t *testing.T) {
		c := start(t)
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 2))
		require.NoError(t, c.sinks.SendFirst(ctx, c.batch(2, c.retrying(2), ev(c.id, 3, agent.EventToken, "17 * 3 = 51"))))
		shown := c.f.next(t, 2)
		require.NoError(t, c.sinks.Fence(ctx, c.id, 1, 3))
		require.NoError(t, c.sinks.SendFirst(ctx, c.batch(3, c.retrying(4))))
		shown = append(shown, c.f.next(t, 1)...)
		// The turn refuses attempt 2's batches from now on: none is shown.
		require.ErrorIs(t, c.sinks.Send(ctx, c.batch(2, ev(c.id, 4, agent.EventToken, " and that is the"))), eventlog.ErrFenced)
		require.ErrorIs(t, c.sinks.Send(ctx, c.batch(2, ev(c.id, 5, agent.EventToken, " answer"))), eventlog.ErrFenced)
		require.NoError(t, c.sinks.Send(ctx, c.batch(3, ev(c.id, 5, agent.EventToken, "17 * 3 = 51 and that is the answer and that"))))
		require.NoError(t, c.sinks.Send(ctx, c.batch(3, ev(c.id, 6, agent.EventToken, " is the answer"))))
		ends(t, c, shown, 7)
	})
}

// signalledCall is a model call, step 1 of an EventLogCallTest turn, whose
// attempts the test plays through the activity side's sinks, with the
// turn's follower.
type signalledCall struct {
	id    string
	sinks eventlog.Sinks
	f     *following
}

// batch is a batch of one attempt of the call.
func (c signalledCall) batch(attempt int, evs ...agent.Event) agent.TokenBatch {
	for i := range evs {
		evs[i].Step, evs[i].Attempt = 1, attempt
	}
	return agent.TokenBatch{StreamID: c.id, Step: 1, Attempt: attempt, First: evs[0].Index, Events: evs}
}

// retrying is a retry's RETRYING at index, voiding the call's events.
func (c signalledCall) retrying(index int64) agent.Event {
	return agent.Event{StreamID: c.id, Index: index, Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 1}
}
