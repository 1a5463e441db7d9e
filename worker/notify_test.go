package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/workflows"
)

// notifyParentResult is what notifyParent saw of its child turn.
type notifyParentResult struct {
	Streamed string           `json:"streamed"`
	Batches  int              `json:"batches"`
	Result   agent.TurnResult `json:"result"`
}

type notifyParentInput struct {
	Prompt    string `json:"prompt"`
	TaskQueue string `json:"task_queue"` // agentflow's
}

// notifyParent runs a turn as a child, by type name and JSON-shaped input
// as a workflow in any SDK would, and asks for its token batches.
func notifyParent(ctx workflow.Context, in notifyParentInput) (notifyParentResult, error) {
	var out notifyParentResult
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	req := agent.TurnRequest{TenantID: "demo", JobID: self + "-turn", Prompt: in.Prompt, Notify: self}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: workflows.TurnWorkflowID(req.TenantID, req.JobID), TaskQueue: in.TaskQueue,
	})
	child := workflow.ExecuteChildWorkflow(cctx, workflows.AgentTurnName, req)
	tokens := workflow.GetSignalChannel(ctx, workflows.SignalNotifyTokens)
	var batches []agent.Event
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(child, func(f workflow.Future) { done = true })
	sel.AddReceive(tokens, func(c workflow.ReceiveChannel, _ bool) {
		var b agent.TokenBatch
		c.Receive(ctx, &b)
		out.Batches++
		batches = append(batches, b.Events...)
	})
	for !done {
		sel.Select(ctx)
	}
	for {
		var b agent.TokenBatch
		if !tokens.ReceiveAsync(&b) {
			break
		}
		out.Batches++
		batches = append(batches, b.Events...)
	}
	if err := child.Get(ctx, &out.Result); err != nil {
		return out, err
	}
	out.Streamed = agent.ReplayText(batches)
	return out, nil
}

func TestNotifyWorkflowReceivesTokenBatches(t *testing.T) {
	e := newEnv(t)
	// The calling process runs on a worker of its own, as it would in
	// another service.
	queue := "process-" + randomID()
	w := sdkworker.New(e.client, queue, sdkworker.Options{})
	w.RegisterWorkflow(notifyParent)
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "process-" + randomID(), TaskQueue: queue},
		notifyParent, notifyParentInput{Prompt: "tell a story", TaskQueue: e.taskQueue})
	require.NoError(t, err)
	var out notifyParentResult
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, storyText, out.Result.Output)
	require.Equal(t, storyText, out.Streamed)
	require.Greater(t, out.Batches, 1)
}
