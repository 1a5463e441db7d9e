package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestScheduleCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := startServer(t, "rules:\n  - when: {user: '^(.+)$'}\n    reply: {text: 'report: $1'}\n")
	id := "nightly-" + newJobID()[16:]
	common := []string{"--id", id, "--address", ts.Address, "--namespace", ts.Namespace, "--task-queue", ts.TaskQueue}
	var out bytes.Buffer
	require.NoError(t, run(ctx, append(append([]string{"schedule", "create"}, common...), "--every", "24h", "summarise the day"), &out))
	require.Contains(t, out.String(), "schedule "+id+" created")

	c := ts.Client()
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, id).Trigger(ctx, client.ScheduleTriggerOptions{}))
	var wid string
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`TemporalScheduledById = %q AND ExecutionStatus = "Completed"`, id)})
		if err != nil || len(resp.GetExecutions()) == 0 {
			return false
		}
		wid = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
		return true
	}, time.Minute, 200*time.Millisecond)
	// What the Web UI lists the run by.
	summary, details := ts.UserMetadata(t, wid)
	require.Equal(t, "scheduled: routed: summarise the day", summary)
	require.Equal(t, "schedule `"+id+"` · tenant `demo` · agent `routed`\n\nsummarise the day", details)
	res, err := ts.Store().Result(ctx, "demo", wid)
	require.NoError(t, err)
	require.Equal(t, "report: summarise the day", res.Output)

	out.Reset()
	require.NoError(t, run(ctx, append([]string{"schedule", "delete"}, common...), &out))
	require.Contains(t, out.String(), "deleted")

	err = run(ctx, append(append([]string{"schedule", "create"}, common...), "summarise"), &out)
	require.ErrorContains(t, err, "--every or --cron is required")
	err = run(ctx, append(append([]string{"schedule", "create"}, common...), "--every", "1h", " "), &out)
	require.ErrorContains(t, err, "prompt is required")
}

// TestScheduleClosesSession: a schedule's run in --session with
// --session-end close closes the session once its result is saved; the
// next run, a new turn of the closed session, fails saying so. A run
// with --session-end mark leaves a session inactive, and a bad value is
// refused before anything is created.
func TestScheduleClosesSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := startServer(t, "rules:\n  - when: {user: '^(.+)$'}\n    reply: {text: 'done: $1'}\n")
	suffix := newJobID()[16:]
	c := ts.Client()
	runs := func(id, status string) []string {
		var ids []string
		require.Eventually(t, func() bool {
			resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf(`TemporalScheduledById = %q AND ExecutionStatus = %q`, id, status)})
			if err != nil || len(resp.GetExecutions()) == 0 {
				return false
			}
			ids = ids[:0]
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			return true
		}, time.Minute, 200*time.Millisecond)
		return ids
	}
	create := func(id, session, end string) {
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"schedule", "create", "--id", id, "--address", ts.Address, "--namespace", ts.Namespace,
			"--task-queue", ts.TaskQueue, "--every", "24h", "--session", session, "--session-end", end, "wrap up"}, &out))
		t.Cleanup(func() { _ = c.ScheduleClient().GetHandle(context.Background(), id).Delete(context.Background()) })
	}

	closing, session := "closing-"+suffix, "report-"+suffix
	create(closing, session, "close")
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, closing).Trigger(ctx, client.ScheduleTriggerOptions{}))
	wid := runs(closing, "Completed")[0]
	res, err := ts.Store().Result(ctx, "demo", wid)
	require.NoError(t, err)
	require.Equal(t, "done: wrap up", res.Output)
	st, err := ts.Store().SessionState(ctx, "demo", session)
	require.NoError(t, err)
	require.Equal(t, store.SessionState{State: store.SessionClosed, EndedBy: res.JobID}, st)

	// The next run is a new turn of the closed session: refused. A run's
	// id is the schedule's and the second it starts in: a trigger within
	// the first run's second starts none, so it is triggered until one
	// starts.
	var failed string
	require.Eventually(t, func() bool {
		require.NoError(t, c.ScheduleClient().GetHandle(ctx, closing).Trigger(ctx, client.ScheduleTriggerOptions{}))
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`TemporalScheduledById = %q AND ExecutionStatus = "Failed"`, closing)})
		if err != nil || len(resp.GetExecutions()) == 0 {
			return false
		}
		failed = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
		return true
	}, time.Minute, 700*time.Millisecond)
	var out agent.TurnResult
	err = c.GetWorkflow(ctx, failed, "").Get(ctx, &out)
	require.ErrorContains(t, err, fmt.Sprintf("session %q was closed by job %q", session, res.JobID))

	marking, marked := "marking-"+suffix, "daily-"+suffix
	create(marking, marked, "mark")
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, marking).Trigger(ctx, client.ScheduleTriggerOptions{}))
	runs(marking, "Completed")
	st, err = ts.Store().SessionState(ctx, "demo", marked)
	require.NoError(t, err)
	require.Equal(t, store.SessionInactive, st.State)

	err = run(ctx, []string{"schedule", "create", "--id", "bad-" + suffix, "--address", ts.Address, "--namespace", ts.Namespace,
		"--every", "1h", "--session-end", "close", "x"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "session_end \"close\" needs session_id")
}
