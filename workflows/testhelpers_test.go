package workflows

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func clientStartOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id}
}

// registerContract registers an activity of the contract's signature
// under each activity name, for the tests' OnActivity to replace: the
// workflows know the activities by name and payload types only.
func registerContract(env *testsuite.TestWorkflowEnvironment) {
	unmocked := errors.New("activity not mocked")
	for name, fn := range map[string]any{
		contract.Route: func(context.Context, contract.RouteInput) (contract.RouteResult, error) {
			return contract.RouteResult{}, unmocked
		},
		contract.LoadAgent: func(context.Context, contract.LoadAgentInput) (contract.LoadAgentResult, error) {
			return contract.LoadAgentResult{}, unmocked
		},
		contract.CallModel: func(context.Context, contract.CallModelInput) (contract.CallModelResult, error) {
			return contract.CallModelResult{}, unmocked
		},
		contract.AwaitModel: func(context.Context, contract.CallModelInput) (contract.CallModelResult, error) {
			return contract.CallModelResult{}, unmocked
		},
		contract.ExecuteTool: func(context.Context, contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			return contract.ExecuteToolResult{}, unmocked
		},
		contract.SaveResult: func(context.Context, contract.SaveResultInput) (agent.TurnResult, error) {
			return agent.TurnResult{}, unmocked
		},
		contract.RecordApproval: func(context.Context, agent.ApprovalRecord) error { return unmocked },
		contract.RunProgram: func(context.Context, contract.RunProgramInput) (contract.RunProgramResult, error) {
			return contract.RunProgramResult{}, unmocked
		},
		// A worker whose live path stores nothing has nothing to seal.
		contract.SealStream: func(context.Context, contract.SealStreamInput) (*agent.TokenBatch, error) { return nil, nil },
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}
