package temporaltool

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// activitySchema is the JSON Schema of the activity kind's config.
const activitySchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["task_queue", "activity_type"],
  "properties": {
    "task_queue": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the task queue the team's worker polls"},
    "activity_type": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the activity type the worker registered"},
    "start_to_close_sec": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "an attempt's start-to-close timeout; default the tool's timeout"},
    "heartbeat_sec": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "the heartbeat timeout, for activities that heartbeat; default none"},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "description": "attempts at most; above 1 only with delivery: idempotent (default 3 then, else 1)"}
  }
}`

// activityTargets are the queue and the type an entry names.
func activityTargets(a agent.ActivityTool) []target {
	return []target{
		{"config.task_queue", reach.Target{Kind: reach.TaskQueue, Name: a.TaskQueue}},
		{"config.activity_type", reach.Target{Kind: reach.Activity, Name: a.ActivityType}},
	}
}

// Activity returns the activity kind, within the operator's allow list.
func Activity(allow *reach.Policy) kind.Kind {
	return scheduledKind(agent.KindActivity, "Calls an activity of the team's own worker.", activitySchema, allow,
		func(spec agent.Tool) (agent.ActivityTool, error) {
			return agent.ParseActivityTool(spec.Config, spec.CallTimeout(0), spec.Delivery == agent.DeliveryIdempotent)
		}, activityTargets)
}
