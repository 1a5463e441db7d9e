package temporaltool

import (
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

// Workflow returns the workflow kind, within the operator's allow list.
func Workflow(allow *reach.Policy) kind.Kind {
	return scheduledKind(agent.KindWorkflow, "Starts a workflow of the team's own worker as a child of the turn, and waits for its result.", workflowSchema, allow,
		func(spec agent.Tool) (agent.WorkflowTool, error) {
			return agent.ParseWorkflowTool(spec.Config, spec.CallTimeout(0))
		},
		func(w agent.WorkflowTool) []target {
			return []target{
				{"config.task_queue", reach.Target{Kind: reach.TaskQueue, Name: w.TaskQueue}},
				{"config.workflow_type", reach.Target{Kind: reach.Workflow, Name: w.WorkflowType}},
			}
		})
}
