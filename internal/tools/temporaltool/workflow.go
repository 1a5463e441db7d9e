package temporaltool

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// workflowSchema is the JSON Schema of the workflow kind's config.
const workflowSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["task_queue", "workflow_type"],
  "properties": {
    "task_queue": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the task queue the team's worker polls"},
    "workflow_type": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the workflow type the worker registered"},
    "execution_timeout_sec": {"type": "integer", "minimum": 1, "maximum": 2592000, "description": "the child's execution timeout; default the tool's timeout"},
    "parent_close_policy": {"enum": ["request_cancel", "terminate", "abandon"], "description": "what becomes of a call still running when its turn closes; default request_cancel"}
  }
}`

// Workflow returns the workflow kind, within the operator's allow list
// (nil: closed, and every entry is refused when a catalog is applied).
func Workflow(allow *reach.Policy) kind.Kind {
	parse := func(spec agent.Tool) (agent.WorkflowTool, error) {
		return agent.ParseWorkflowTool(spec.Config, spec.CallTimeout(0))
	}
	return kind.Kind{
		Name:        agent.KindWorkflow,
		Description: "Starts a workflow of the team's own worker as a child of the turn, and waits for its result.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Config:      json.RawMessage(workflowSchema),
		Approval:    agent.ApprovalAlways, // as every kind whose calls can change things
		Build: func(spec agent.Tool, _ kind.Deps) (kind.Tool, error) {
			if _, err := parse(spec); err != nil {
				return nil, err
			}
			if err := checkParameters(spec); err != nil {
				return nil, err
			}
			return scheduled{}, nil
		},
		Admit: func(tenantID string, spec agent.Tool) error {
			w, err := parse(spec)
			if err != nil {
				return err
			}
			if err := allow.Check(tenantID, "config.task_queue", reach.Target{Kind: reach.TaskQueue, Name: w.TaskQueue}); err != nil {
				return err
			}
			return allow.Check(tenantID, "config.workflow_type", reach.Target{Kind: reach.Workflow, Name: w.WorkflowType})
		},
	}
}
