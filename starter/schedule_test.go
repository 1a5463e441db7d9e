package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/deliver"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
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
	// A run's id is one no client of the gateway may take, and its
	// caller is the schedule.
	require.True(t, strings.HasPrefix(wid, "turn/demo/af:schedule:"+id+"-"), wid)
	require.Contains(t, out.String(), "each run is turn/demo/af:schedule:"+id+"-<time>")
	turn, err := ts.Store().Turn(ctx, "demo", wid)
	require.NoError(t, err)
	require.Equal(t, &agent.Caller{Name: "schedule:" + id, Issuer: "agentflow:schedule", Subject: id}, turn.Request.Caller)

	out.Reset()
	require.NoError(t, run(ctx, append([]string{"schedule", "delete"}, common...), &out))
	require.Contains(t, out.String(), "deleted")

	err = run(ctx, append(append([]string{"schedule", "create"}, common...), "summarise"), &out)
	require.ErrorContains(t, err, "--every or --cron is required")
	err = run(ctx, append(append([]string{"schedule", "create"}, common...), "--every", "1h", " "), &out)
	require.ErrorContains(t, err, "prompt is required")
	err = run(ctx, append(append([]string{"schedule", "create"}, common...), "--every", "1h", "--session", "af:telegram:a:b:1:1", "hi"), &out)
	require.ErrorContains(t, err, `--session "af:telegram:a:b:1:1" begins with "af:", which is reserved`)
	err = run(ctx, []string{"schedule", "create", "--id", "a/b", "--address", ts.Address, "--every", "1h", "hi"}, &out)
	require.ErrorContains(t, err, `--id "a/b" may not contain '/'`)
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

// TestScheduleDelivers: a schedule created with --deliver names a
// webhook target of its agent that only runs asking for it reach: a
// triggered run's result reaches the receiver once, signed, as that
// run's delivery. A malformed --deliver is refused before anything is
// created.
func TestScheduleDelivers(t *testing.T) {
	t.Setenv("SCHEDULE_HOOK_KEY", "schedule-key-1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		received []deliver.Payload
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := deliver.Verify("schedule-key-1", r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p deliver.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		received = append(received, p)
	}))
	defer hook.Close()
	ts := testserver.Start(t, testserver.Options{
		Script: "rules:\n  - when: {user: '^(.+)$'}\n    reply: {text: 'sent: $1'}\n",
		Catalogs: []string{`tenant: demo
default_agent: a
egress: ["127.0.0.1"]
agents:
  - id: a
    model: openai:gpt-4o-mini
    deliver:
      - {name: hook, kind: webhook, url: '` + hook.URL + `/in', secret: 'env:SCHEDULE_HOOK_KEY'}
`},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	c := ts.Client()
	id := "delivering-" + newJobID()[16:]
	common := []string{"schedule", "create", "--id", id, "--address", ts.Address, "--namespace", ts.Namespace, "--task-queue", ts.TaskQueue}
	require.NoError(t, run(ctx, append(common, "--every", "24h", "--deliver", "hook", "the daily digest"), &bytes.Buffer{}))
	t.Cleanup(func() { _ = c.ScheduleClient().GetHandle(context.Background(), id).Delete(context.Background()) })

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
	// The run's Delivery ends once the receiver took it.
	require.NoError(t, c.GetWorkflow(ctx, contract.DeliveryWorkflowID(wid), "").Get(ctx, nil))
	res, err := ts.Store().Result(ctx, "demo", wid)
	require.NoError(t, err)
	require.Equal(t, "sent: the daily digest", res.Output)

	mu.Lock()
	got := slices.Clone(received)
	mu.Unlock()
	require.Len(t, got, 1, "one signed delivery")
	require.Equal(t, wid+"/hook", got[0].DeliveryID)
	require.Equal(t, wid, got[0].StreamID)
	require.Equal(t, res.JobID, got[0].JobID)
	require.Equal(t, "demo", got[0].TenantID)
	require.Equal(t, agent.StatusCompleted, got[0].Status)
	require.Equal(t, "sent: the daily digest", got[0].Output)
	attempts, err := ts.Store().DeliveryAttempts(ctx, "demo", res.JobID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, "hook", attempts[0].Target)
	require.Equal(t, store.DeliveryDelivered, attempts[0].Outcome)

	err = run(ctx, []string{"schedule", "create", "--id", "bad-" + id, "--address", ts.Address, "--namespace", ts.Namespace,
		"--every", "1h", "--deliver", ":1", "x"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "want NAME or NAME:CHAT")
}
