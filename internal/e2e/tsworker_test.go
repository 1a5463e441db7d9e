package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/nodeclient"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestActivityToolTypeScript: the team's worker is written with
// Temporal's TypeScript SDK (@temporalio/worker, pinned by
// examples/activitytools/typescript's lockfile): an activity tool's call reaches it on
// its queue, its activity interceptor reads who asked from the
// agentflow-asked header, and what it returns is the tool's result. The
// catalog entry takes its description and parameters from what the
// worker publishes (the agentflow.tools activity, in JavaScript).
func TestActivityToolTypeScript(t *testing.T) {
	dir := nodeClientAt(t, filepath.Join("..", "..", "examples", "activitytools", "typescript"), "@temporalio/worker")
	queue := "ts-orders-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:LookupOrder")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: activityToolScript, TemporalAllow: allow})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	startNodeWorker(t, dir, "TEMPORAL_ADDRESS="+srv.Address, "TEMPORAL_NAMESPACE="+srv.Namespace, "ORDERS_TASK_QUEUE="+queue)
	// The entry names the queue and the type only: the description and
	// parameters are what the TypeScript worker publishes.
	srv.ApplyCatalog(t, strings.ReplaceAll(publishedCatalog, "QUEUE", queue))

	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "Where is order A17?", JobID: "ts-" + testserver.RandomID()}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "It has shipped.", res.Output)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	reqs := srv.Model.Requests()
	last := reqs[len(reqs)-1].Messages
	tool := last[len(last)-1].Content
	require.Contains(t, tool, `"served_by":"typescript"`, "the TypeScript worker answered")
	require.Contains(t, tool, `"tenant":"demo"`, "and read who asked from the header")
	require.Contains(t, tool, `"key":"`+req.JobID+`:tool:`)
	shown := reqs[0].ToolsJSON
	require.Contains(t, shown, "from the TypeScript worker", "the model is shown the description the worker published")
	require.Contains(t, shown, "as on the receipt")
}

// startNodeWorker runs the Temporal worker of a Node.js client's folder
// (worker.mjs) with env until the test ends, once it says it polls.
func startNodeWorker(t *testing.T, dir string, env ...string) {
	t.Helper()
	cmd := exec.Command("node", "worker.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { nodeclient.Stop(cmd, 30*time.Second) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the TypeScript worker: %s", stderr.Bytes())
	require.Equal(t, "ready", strings.TrimSpace(line))
}
