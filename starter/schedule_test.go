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
