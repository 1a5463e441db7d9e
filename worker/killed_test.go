package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/workflows"
)

// TestApprovalSurvivesWorkerKill kills the worker process while a turn
// waits for approval; after a new worker starts, the approval resumes it.
func TestApprovalSurvivesWorkerKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := devtest.Database(t)
	address, namespace := devtest.Temporal(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	scriptFile := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(scriptFile, []byte(testScript), 0o644))

	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	st, err := store.Open(ctx, dbURL, store.Options{Logger: logger})
	require.NoError(t, err)
	defer st.Close()
	kinds, err := tools.NewRegistry(tools.Deps{Logger: logger}, tools.Builtin()...)
	require.NoError(t, err)
	cat, err := registry.Parse(kinds, "care.yaml", []byte(careCatalog))
	require.NoError(t, err)
	_, err = st.ApplyCatalog(ctx, toStoreCatalog(cat), false)
	require.NoError(t, err)

	queue := "agentflow-approve-kill-" + randomID()
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE="+namespace,
			"AGENTFLOW_TASK_QUEUE="+queue, "AGENTFLOW_HTTP_ADDR=off", "AGENTFLOW_SCRIPT="+scriptFile,
			"AGENTFLOW_LOG_LEVEL=error", "AGENTFLOW_ROLES=worker")
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	defer c.Close()

	first := startWorker()
	req := agent.TurnRequest{TenantID: "care", JobID: "kill-" + randomID(), Prompt: "What is 6 * 7?"}
	req.Normalize()
	run, err := c.ExecuteWorkflow(ctx, workflows.StartTurnOptions(queue, req), workflows.AgentTurnName, req)
	require.NoError(t, err)

	var pending []agent.PendingApproval
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, run.GetID(), "", workflows.QueryPendingApprovals)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1
	}, 30*time.Second, 50*time.Millisecond)

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	startWorker()

	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: workflows.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{agent.ApprovalDecision{CallID: pending[0].CallID, Approved: true, Approver: "ana"}},
	})
	require.NoError(t, err)
	var ack workflows.ApprovalAck
	require.NoError(t, h.Get(ctx, &ack))
	require.Equal(t, agent.ApprovalApproved, ack.Outcome)

	var res agent.TurnResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "The result is 42.", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
}
