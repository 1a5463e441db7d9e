package eventlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// callBatch is a batch of a live-first model call, step 1, attempt 1.
func callBatch(streamID string, evs ...agent.Event) agent.TokenBatch {
	for i := range evs {
		evs[i].Step, evs[i].Attempt = 1, 1
	}
	return agent.TokenBatch{StreamID: streamID, Step: 1, Attempt: 1, First: evs[0].Index, Events: evs}
}

// TestReadWhileTaskHeld: a read made while a local activity holds the
// turn's workflow task — which the events query waits for — answers at
// once from the live path: the events the turn handed the call and what
// the call has streamed, paged, and an after_index past them refused. A
// read that waits returns with the next batch; one whose wait ends with
// nothing returns the empty page. Once the task ends, reads answer from
// the log.
func TestReadWhileTaskHeld(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	begun := []agent.Event{ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventStepStart, "")}
	e.log(id, begun...)

	// The turn hands its events to its model call, a local activity that
	// holds the workflow task while it streams, live first.
	require.NoError(t, e.pub.Put(ctx, agent.TokenBatch{StreamID: id, First: 1, Events: begun}))
	require.NoError(t, e.c.SignalWorkflow(ctx, id, "", "hold", nil))
	select {
	case <-e.holder.started:
	case <-ctx.Done():
		t.Fatal("the local activity did not start")
	}
	require.NoError(t, e.pub.Append(ctx, callBatch(id, ev(id, 3, agent.EventToken, "Hel"), ev(id, 4, agent.EventToken, "lo")), false))

	// Every read below returns while the task is held: were it to wait
	// for the query, it would wait until the test's context ends.
	page, err := e.follower.Read(ctx, id, 0, 0, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 1, 4)
	require.Equal(t, "Hello", agent.ReplayText(page.Events))
	require.Equal(t, int64(5), page.Next)
	require.False(t, page.Done)
	require.Equal(t, "demo", page.TenantID, "the turn's tenant, from its search attribute")

	page, err = e.follower.Read(ctx, id, 2, 1, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 3, 3)
	require.Equal(t, int64(5), page.Next, "a page cut at its size still says where the stream ends")

	page, err = e.follower.Read(ctx, id, 4, 0, 0)
	require.NoError(t, err)
	require.Empty(t, page.Events, "the reader has everything")
	require.Equal(t, int64(5), page.Next)

	// A read that waits gets the next batch when it comes.
	type read struct {
		page agent.EventsPage
		err  error
	}
	waited := make(chan read, 1)
	go func() {
		p, err := e.follower.Read(ctx, id, 4, 0, time.Minute)
		waited <- read{p, err}
	}()
	require.NoError(t, e.pub.Append(ctx, callBatch(id, ev(id, 5, agent.EventToken, " world")), true))
	r := <-waited
	require.NoError(t, r.err)
	requireIndices(t, r.page.Events, 5, 5)
	require.Equal(t, " world", r.page.Events[0].Text)
	require.Equal(t, int64(6), r.page.Next)

	// One whose wait ends with nothing new answers the empty page.
	page, err = e.follower.Read(ctx, id, 5, 0, 300*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, page.Events)
	require.Equal(t, int64(6), page.Next)
	require.False(t, page.Done)

	// The call ends: the turn logs it, and reads answer from the log.
	close(e.holder.release)
	e.log(id, ev(id, 3, agent.EventToken, "Hel"), ev(id, 4, agent.EventToken, "lo"), ev(id, 5, agent.EventToken, " world"),
		ev(id, 6, agent.EventStatus, agent.StreamCompleted))
	before := e.counter.queries.Load()
	page, err = e.follower.Read(ctx, id, 3, 0, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 4, 6)
	require.True(t, page.Done)
	require.Greater(t, e.counter.queries.Load(), before, "read from the log")
}

// TestReadBetweenTasks: between the turn's workflow tasks the log
// answers, though the live path holds the stream from the reader's
// position: a turn waiting for a decision has logged events it has
// handed no activity. What a live-first call has stored past the log's
// end follows the log's events, and extends the end an after_index may
// name.
func TestReadBetweenTasks(t *testing.T) {
	e := newFollowEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := e.start()
	begun := []agent.Event{ev(id, 1, agent.EventStatus, agent.StreamRunning), ev(id, 2, agent.EventStepStart, "")}
	e.log(id, begun...)
	require.NoError(t, e.pub.Put(ctx, agent.TokenBatch{StreamID: id, First: 1, Events: begun}))
	e.log(id, agent.Event{StreamID: id, Index: 3, Kind: agent.EventApprovalRequired})

	page, err := e.follower.Read(ctx, id, 0, 0, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 1, 3)
	require.Equal(t, agent.EventApprovalRequired, page.Events[2].Kind, "the log's, not the live path's")
	require.Equal(t, int64(4), page.Next)

	// A model call streams past the log's end.
	require.NoError(t, e.pub.Append(ctx, callBatch(id, ev(id, 4, agent.EventToken, "a"), ev(id, 5, agent.EventToken, "b")), false))
	page, err = e.follower.Read(ctx, id, 2, 0, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 3, 5)
	require.Equal(t, int64(6), page.Next)
	page, err = e.follower.Read(ctx, id, 2, 1, 0)
	require.NoError(t, err)
	requireIndices(t, page.Events, 3, 3)
	page, err = e.follower.Read(ctx, id, 5, 0, 0)
	require.NoError(t, err, "the end of what the call streamed is no beyond")
	require.Empty(t, page.Events)
	require.Equal(t, int64(6), page.Next)

	for _, tc := range []struct {
		name  string
		id    string
		after int64
		code  agent.Code
	}{
		{"past the end", id, 6, agent.CodeInvalid},
		{"negative", id, -1, agent.CodeInvalid},
		{"no such stream", contract.TurnWorkflowID("demo", "no-such-job"), 0, agent.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.follower.Read(ctx, tc.id, tc.after, 0, 0)
			require.True(t, agent.IsCode(err, tc.code), "%v", err)
		})
	}
	t.Run("a workflow of another tenant than its id names", func(t *testing.T) {
		other := contract.TurnWorkflowID("other", "job-"+randomID())
		_, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: other, TaskQueue: e.queue}, "EventLogTest")
		require.NoError(t, err)
		defer func() { _ = e.c.TerminateWorkflow(context.Background(), other, "", "test over") }()
		_, err = e.follower.Read(ctx, other, 0, 0, 0)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	})
}
