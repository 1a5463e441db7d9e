package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/examples/process"
)

// TestProcessExample runs the example process: a turn as a child by type
// name and JSON input, its token batches received through notify, then a
// second turn that uses the first one's result.
func TestProcessExample(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The example runs on a worker and a task queue of its own, as an
	// application's workflow would.
	queue := "examples-" + randomID()
	w := sdkworker.New(e.Client(), queue, sdkworker.Options{})
	process.Register(w)
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := e.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "process-" + randomID(), TaskQueue: queue},
		process.Name, process.Input{TenantID: "demo", Question: "tell a story", TaskQueue: e.TaskQueue})
	require.NoError(t, err)
	var out process.Result
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, storyText, out.Answer)
	require.Equal(t, storyText, out.Streamed, "the batches carry the whole answer, once")
	require.Greater(t, out.Batches, 1)
	require.NotEmpty(t, out.AnswerRef)
	require.Equal(t, "I don't know.", out.Check)

	res, err := e.Store().Result(ctx, "demo", run.GetID()+"-check")
	require.NoError(t, err)
	require.Equal(t, out.Check, res.Output)
}
