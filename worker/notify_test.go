package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/workflows"
)

// TestProcessExample runs the example process: a turn as a child by type
// name and JSON input, its token batches received through notify, then a
// second turn that uses the first one's result.
func TestProcessExample(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "process-" + randomID(), TaskQueue: e.taskQueue},
		workflows.ProcessExampleName, workflows.ProcessInput{TenantID: "demo", Question: "tell a story"})
	require.NoError(t, err)
	var out workflows.ProcessResult
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, storyText, out.Answer)
	require.Equal(t, storyText, out.Streamed, "the batches carry the whole answer, once")
	require.Greater(t, out.Batches, 1)
	require.NotEmpty(t, out.AnswerRef)
	require.Equal(t, "I don't know.", out.Check)

	res, err := e.srv.Store().Result(ctx, "demo", run.GetID()+"-check")
	require.NoError(t, err)
	require.Equal(t, out.Check, res.Output)
}
