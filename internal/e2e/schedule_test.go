package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestScheduledTurns creates a schedule with the real temporal CLI exactly as
// docs/guides/schedules.md shows, triggers it twice, and finds two turns with
// fresh context, each with its own stored result.
func TestScheduledTurns(t *testing.T) {
	e := newEnv(t)
	id := "report-" + testserver.RandomID()
	out, err := e.Temporal("schedule", "create", "--schedule-id", id, "--interval", "24h",
		"--task-queue", e.TaskQueue, "--type", "AgentTurn", "--workflow-id", "turn/demo/af:schedule:"+id,
		"--input", `{"tenant_id":"demo","prompt":"What is 2 + 3?","history":"fresh"}`)
	require.NoError(t, err, out)
	t.Cleanup(func() { _, _ = e.Temporal("schedule", "delete", "--schedule-id", id) })
	for range 2 {
		out, err := e.Temporal("schedule", "trigger", "--schedule-id", id, "--overlap-policy", "AllowAll")
		require.NoError(t, err, out)
		time.Sleep(1100 * time.Millisecond) // runs are named by the second they start
	}

	var ids []string
	require.Eventually(t, func() bool {
		resp, err := e.Client().ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`TemporalScheduledById = %q AND ExecutionStatus = "Completed"`, id),
		})
		if err != nil {
			return false
		}
		ids = ids[:0]
		for _, w := range resp.GetExecutions() {
			ids = append(ids, w.GetExecution().GetWorkflowId())
		}
		return len(ids) == 2
	}, 3*time.Minute, 200*time.Millisecond) // the scheduler and visibility of a loaded server

	refs := map[string]bool{}
	for _, wid := range ids {
		res, err := e.result(wid)
		require.NoError(t, err)
		require.Equal(t, "The result is 5.", res.Output)
		require.Equal(t, wid, res.JobID, "the job id is the run's workflow id")
		require.True(t, strings.HasPrefix(wid, "turn/demo/af:schedule:"+id+"-"), wid)
		stored, err := e.Store().Result(context.Background(), "demo", wid)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, stored.Status)
		refs[stored.ResultRef] = true
	}
	require.Len(t, refs, 2, "each run stored its own result")
}
