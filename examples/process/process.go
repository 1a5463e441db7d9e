// Package process is an example "intelligent process": an application's
// workflow that runs agentflow turns as steps, on a worker and a task
// queue of its own (./worker). AgentProcessNexusExample calls the agents
// through a Nexus endpoint (the service agentflow.v1.Agents), from any
// namespace; AgentProcessExample runs each turn as a child workflow, in
// agentflow's namespace, knowing agentflow only by the contract's names
// and JSON, as a workflow written with any other SDK would.
package process

import (
	"cmp"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Name is the example workflow's type.
const Name = "AgentProcessExample"

// TaskQueue is the example worker's default task queue.
const TaskQueue = "agentflow-examples"

// Register registers the example workflows: AgentProcessExample under
// Name and AgentProcessNexusExample under NexusName.
func Register(r interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(AgentProcessExample, workflow.RegisterOptions{Name: Name})
	r.RegisterWorkflowWithOptions(AgentProcessNexusExample, workflow.RegisterOptions{Name: NexusName})
}

// Input asks the process to answer a question and check the answer.
type Input struct {
	TenantID string `json:"tenant_id"`
	Question string `json:"question"`
	// TaskQueue is agentflow's task queue; empty: contract.TaskQueue.
	TaskQueue string `json:"task_queue,omitempty"`
}

// Result is what the process made of its two agent steps.
type Result struct {
	Answer    string `json:"answer"`
	AnswerRef string `json:"answer_ref"`
	// Streamed is the answer as it arrived in token batches (notify), and
	// Batches how many there were.
	Streamed string `json:"streamed"`
	Batches  int    `json:"batches"`
	Check    string `json:"check"`
}

// AgentProcessExample runs an agent turn as a child workflow — by type name
// and with a JSON object as input, exactly as a workflow in any other SDK
// would — watches its tokens arrive through notify, then uses the result:
// a second turn checks the answer, pointing at it by result_ref.
func AgentProcessExample(ctx workflow.Context, in Input) (Result, error) {
	var out Result
	if in.TenantID == "" || in.Question == "" {
		return out, temporal.NewNonRetryableApplicationError("tenant_id and question are required", agent.ErrTypeInvalidRequest, nil)
	}
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	tokens := workflow.GetSignalChannel(ctx, contract.SignalNotifyTokens)

	// Step 1, streamed to this workflow.
	answer, err := runStep(ctx, in, "answer", map[string]any{
		"tenant_id": in.TenantID, "job_id": self + "-answer", "prompt": in.Question, "history": "fresh",
		"node_id": "answer", "run_id": self, "notify": self,
	}, func(b agent.TokenBatch) {
		out.Batches++
		out.Streamed += b.Text()
	}, tokens)
	if err != nil {
		return out, err
	}
	out.Answer, out.AnswerRef = answer.Output, answer.ResultRef

	// Step 2 uses step 1's result.
	check, err := runStep(ctx, in, "check", map[string]any{
		"tenant_id": in.TenantID, "job_id": self + "-check", "history": "fresh",
		"prompt":  fmt.Sprintf("Check this answer to %q: %s", in.Question, answer.Output),
		"node_id": "check", "run_id": self,
		"context": map[string]any{"previous_results": []map[string]any{{"node_id": "answer", "result_ref": answer.ResultRef}}},
	}, nil, nil)
	if err != nil {
		return out, err
	}
	out.Check = check.Output
	return out, nil
}

// runStep runs one AgentTurn child and, while it runs, hands its token
// batches to onBatch.
func runStep(ctx workflow.Context, in Input, node string, input map[string]any, onBatch func(agent.TokenBatch),
	tokens workflow.ReceiveChannel) (agent.TurnResult, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          contract.TurnWorkflowID(in.TenantID, input["job_id"].(string)),
		WorkflowTaskTimeout: contract.TurnTaskTimeout,
		TaskQueue:           cmp.Or(in.TaskQueue, contract.TaskQueue),
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_ABANDON,
		// What the Web UI lists the step by, as for every other turn.
		StaticSummary: contract.OneLine("process "+node+": "+fmt.Sprint(input["prompt"]), 100),
	})
	child := workflow.ExecuteChildWorkflow(cctx, contract.AgentTurn, input)
	take := func(c workflow.ReceiveChannel) {
		var b agent.TokenBatch
		c.Receive(ctx, &b)
		if onBatch != nil {
			onBatch(b)
		}
	}
	if tokens != nil {
		done := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(child, func(workflow.Future) { done = true })
		sel.AddReceive(tokens, func(c workflow.ReceiveChannel, _ bool) { take(c) })
		for !done {
			sel.Select(ctx)
		}
		for tokens.Len() > 0 {
			take(tokens)
		}
	}
	var res agent.TurnResult
	if err := child.Get(ctx, &res); err != nil {
		if failed, ok := contract.FailedResult(err); ok && failed.Error != nil {
			return failed, temporal.NewNonRetryableApplicationError(fmt.Sprintf("step %s: %s", node, failed.Error.Message), failed.Error.Type, nil)
		}
		return res, fmt.Errorf("step %s: %w", node, err)
	}
	return res, nil
}
