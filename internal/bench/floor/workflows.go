package main

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// shapeArgs are TurnShape's arguments for o.
func (o options) shapeArgs() []any { return []any{o.signals, o.localModel} }

// ModelCalls is the least a durable turn of the peers' shape can be on
// Temporal: its two model calls as local activities, nothing else — no
// routing, no tool, no result to store, no search attribute, no timer.
func ModelCalls(ctx workflow.Context) error {
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	for call := range 2 {
		if err := workflow.ExecuteLocalActivity(local, "FloorModel", id, call, 0).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// Empty is a workflow with nothing in it: one workflow task.
func Empty(workflow.Context) error { return nil }

// TurnShape has the tasks of a streamed turn with one local tool call and
// no work in them: two local steps (route, load the agent), the search
// attribute upsert, a timer for the turn's timeout, a model call that asks for the tool, the tool as a local
// step, a model call that streams its reply (as signals, when signals > 0),
// a local step that saves the result. With localModel the model calls are
// local activities too, as a turn's are on the defaults: the whole turn is
// then one workflow task.
func TurnShape(ctx workflow.Context, signals int, localModel bool) error {
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for range 2 {
		if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, contract.SearchTenant.ValueSet("floor"), contract.SearchAgent.ValueSet("floor")); err != nil {
		return err
	}
	tctx, cancelTimer := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, 10*time.Minute)
	_ = timer
	remote := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	tokens := workflow.GetSignalChannel(ctx, contract.SignalTokens)
	model := func(call, n int) error {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		if localModel {
			return workflow.ExecuteLocalActivity(local, "FloorModel", id, call, 0).Get(ctx, nil)
		}
		f := workflow.ExecuteActivity(remote, "FloorModel", id, call, n)
		done := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) { done = true })
		sel.AddReceive(tokens, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		for !done {
			sel.Select(ctx)
		}
		for tokens.ReceiveAsync(nil) {
		}
		return f.Get(ctx, nil)
	}
	if err := model(0, 0); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
		return err
	}
	if err := model(1, signals); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
		return err
	}
	cancelTimer()
	return nil
}

type activities struct {
	client client.Client
	times  []time.Duration // how long each model call takes, by call (-model-ms)
}

// Step does nothing.
func (a *activities) Step(context.Context) error { return nil }

// Model takes as long as the call-th model call of -model-ms, and sends n
// signals to the workflow that called it, one after another, as a
// streaming model call sends its token batches.
func (a *activities) Model(ctx context.Context, workflowID string, call, n int) error {
	if call == 0 {
		firstCall(workflowID)
	}
	if call < len(a.times) {
		select {
		case <-time.After(a.times[call]):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range n {
		if err := a.client.SignalWorkflow(ctx, workflowID, "", contract.SignalTokens, "batch"); err != nil {
			return err
		}
	}
	return nil
}
