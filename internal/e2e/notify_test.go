package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/examples/process"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestProcessExample runs the example process: a turn as a child by type
// name and JSON input, its token batches received through notify, then a
// second turn that uses the first one's result.
func TestProcessExample(t *testing.T) {
	e := newEnv(t)
	out, id := runProcess(t, e.Server, "tell a story")
	require.Equal(t, storyText, out.Answer)
	require.Equal(t, storyText, out.Streamed, "the batches carry the whole answer, once")
	require.Greater(t, out.Batches, 1)
	require.NotEmpty(t, out.AnswerRef)
	require.Equal(t, "I don't know.", out.Check)

	res, err := e.Store().Result(context.Background(), "demo", id+"-check")
	require.NoError(t, err)
	require.Equal(t, out.Check, res.Output)
}

// runProcess runs the example process on question, on a worker and a task
// queue of its own, as an application's workflow would run; it returns the
// process's result and workflow id.
func runProcess(t *testing.T, srv *testserver.Server, question string) (process.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queue := "examples-" + testserver.RandomID()
	w := sdkworker.New(srv.Client(), queue, sdkworker.Options{})
	process.Register(w)
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "process-" + testserver.RandomID(), TaskQueue: queue},
		process.Name, process.Input{TenantID: "demo", Question: question, TaskQueue: srv.TaskQueue})
	require.NoError(t, err)
	var out process.Result
	require.NoError(t, run.Get(ctx, &out))
	return out, run.GetID()
}
