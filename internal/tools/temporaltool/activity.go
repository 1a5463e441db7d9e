package temporaltool

import (
	"bytes"
	"context"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/toolargs"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
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

// activityDescription is the kind's description, an entry's when it
// writes none.
const activityDescription = "Calls an activity of the team's own worker."

// parseActivity is the activity entry's config, checked.
func parseActivity(spec agent.Tool) (agent.ActivityTool, error) {
	return agent.ParseActivityTool(spec.Config, spec.CallTimeout(0), spec.Delivery == agent.DeliveryIdempotent)
}

// Activity returns the activity kind, within the operator's allow list.
// An entry that writes no description or parameters takes them from what
// the team's worker publishes (resolveActivity).
func Activity(allow *reach.Policy) kind.Kind {
	k := scheduledKind(agent.KindActivity, activityDescription, activitySchema, allow, parseActivity, activityTargets)
	k.Resolve = resolveActivity
	return k
}

// resolveActivity fills what an activity entry does not write itself —
// its description, its parameters — from what the team's worker on its
// queue publishes (agent.PublishedTools, asked through Deps.Describe),
// so that the code's owner describes it once, beside the code. An entry
// that writes both asks nothing.
func resolveActivity(ctx context.Context, spec agent.Tool, env kind.ResolveEnv) ([]agent.Tool, error) {
	ownDescription := spec.Description != "" && spec.Description != activityDescription
	ownParameters := len(spec.Parameters) > 0 && !bytes.Equal(spec.Parameters, []byte(defaultParameters))
	if (ownDescription && ownParameters) || env.Deps.Describe == nil {
		return []agent.Tool{spec}, nil
	}
	a, err := parseActivity(spec)
	if err != nil {
		return nil, err
	}
	published, err := env.Deps.Describe(ctx, a.TaskQueue)
	if err != nil {
		if env.AllowUnreachable && agent.IsCode(err, agent.CodeUnavailable) {
			return []agent.Tool{spec}, nil // the kind's defaults, until the worker answers
		}
		return nil, err
	}
	p, ok := published.Tool(a.ActivityType)
	if !ok {
		var names []string
		for _, t := range published.Tools {
			names = append(names, t.ActivityType)
		}
		return nil, agent.Errorf(agent.CodeInvalid, "the worker on task queue %q publishes no tool for activity %q (it publishes: %s): write the entry's description and parameters",
			a.TaskQueue, a.ActivityType, words.Listed(names, 20))
	}
	if !ownDescription {
		spec.Description = p.Description
	}
	if !ownParameters {
		if _, err := toolargs.Compile(p.Parameters); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "the worker on task queue %q publishes for activity %q %v", a.TaskQueue, a.ActivityType, err)
		}
		spec.Parameters = p.Parameters
	}
	return []agent.Tool{spec}, nil
}
