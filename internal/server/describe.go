package server

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// describeQueue asks the team's worker on taskQueue how it describes its
// activities as tools (kind.Deps.Describe): a DescribeTools workflow on
// agentflow's own queue runs its agentflow.tools activity there.
func (s *Server) describeQueue(ctx context.Context, taskQueue string) (agent.PublishedTools, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       "describe-tools/" + taskQueue + "/" + rand.Text(),
		TaskQueue:                s.cfg.TaskQueue,
		WorkflowExecutionTimeout: 30 * time.Second,
	}, contract.DescribeTools, contract.DescribeToolsInput{TaskQueue: taskQueue})
	if err != nil {
		return agent.PublishedTools{}, agent.Errorf(agent.CodeUnavailable, "ask the worker on task queue %q for its tools: %v", taskQueue, err)
	}
	var out agent.PublishedTools
	err = run.Get(ctx, &out)
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &timeout) || ctx.Err() != nil:
		return out, agent.Errorf(agent.CodeUnavailable, "no worker on task queue %q answered %s in time", taskQueue, agent.PublishedToolsActivity)
	case errors.As(err, &app):
		return out, agent.Errorf(agent.CodeInvalid, "the worker on task queue %q could not describe its tools (%s): %s", taskQueue, agent.PublishedToolsActivity, app.Error())
	}
	return out, agent.Errorf(agent.CodeUnavailable, "ask the worker on task queue %q for its tools: %v", taskQueue, err)
}
