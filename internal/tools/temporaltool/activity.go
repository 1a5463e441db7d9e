package temporaltool

import (
	"context"
	"encoding/json"

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

// admit refuses an entry naming a queue or a type the operator did not
// open to the tenant, naming the config field.
func admit(a agent.ActivityTool, p *reach.Policy, tenantID string) error {
	if err := p.Check(tenantID, "config.task_queue", reach.Target{Kind: reach.TaskQueue, Name: a.TaskQueue}); err != nil {
		return err
	}
	return p.Check(tenantID, "config.activity_type", reach.Target{Kind: reach.Activity, Name: a.ActivityType})
}

// Activity returns the activity kind, within the operator's allow list
// (nil: closed, and every entry is refused when a catalog is applied).
func Activity(allow *reach.Policy) kind.Kind {
	return kind.Kind{
		Name:        agent.KindActivity,
		Description: "Calls an activity of the team's own worker.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Config:      json.RawMessage(activitySchema),
		// What a team's activity does is the team's: its calls wait for a
		// person unless the catalog writes another policy.
		Approval: agent.ApprovalAlways,
		Build: func(spec agent.Tool, _ kind.Deps) (kind.Tool, error) {
			if _, err := agent.ParseActivityTool(spec.Config, spec.CallTimeout(0), spec.Delivery == agent.DeliveryIdempotent); err != nil {
				return nil, err
			}
			if err := checkParameters(spec); err != nil {
				return nil, err
			}
			return scheduled{}, nil
		},
		Admit: func(tenantID string, spec agent.Tool) error {
			a, err := agent.ParseActivityTool(spec.Config, spec.CallTimeout(0), spec.Delivery == agent.DeliveryIdempotent)
			if err != nil {
				return err
			}
			return admit(a, allow, tenantID)
		},
	}
}

// scheduled is the runner of a tool the turn schedules itself: the
// tool runtime never runs its calls, and says so if asked to.
type scheduled struct{}

func (scheduled) Run(context.Context, kind.Call) (kind.Output, error) {
	return kind.Output{}, agent.Errorf(agent.CodeInternal, "an activity tool's calls are scheduled by the turn, not run by the tool runtime")
}
