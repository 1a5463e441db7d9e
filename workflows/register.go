package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// Registry is where workflows are registered: a worker, a replayer or a
// test environment.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the workflows under their contract names.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(AgentTurn, workflow.RegisterOptions{Name: contract.AgentTurn})
	r.RegisterWorkflowWithOptions(Conversation, workflow.RegisterOptions{Name: contract.Conversation})
	r.RegisterWorkflowWithOptions(Evaluation, workflow.RegisterOptions{Name: contract.Evaluation})
}
