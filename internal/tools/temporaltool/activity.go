package temporaltool

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// ActivityKind is the name catalogs give the activity kind.
const ActivityKind = "activity"

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
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "description": "attempts at most; default 3"}
  }
}`

// Activity is an activity tool's entry, checked: where the turn
// schedules the call and with what options.
type Activity struct {
	TaskQueue    string        `json:"task_queue"`
	ActivityType string        `json:"activity_type"`
	StartToClose time.Duration `json:"-"`
	Heartbeat    time.Duration `json:"-"`
	MaxAttempts  int           `json:"-"`
}

// activityConfig is the config as a catalog writes it.
type activityConfig struct {
	TaskQueue       string `json:"task_queue"`
	ActivityType    string `json:"activity_type"`
	StartToCloseSec int    `json:"start_to_close_sec,omitempty"`
	HeartbeatSec    int    `json:"heartbeat_sec,omitempty"`
	MaxAttempts     int    `json:"max_attempts,omitempty"`
}

// defaultAttempts is an activity tool's attempts unless its entry says.
const defaultAttempts = 3

// ParseActivity checks an activity entry's config; timeout is the tool's
// call timeout, the default start-to-close.
func ParseActivity(raw json.RawMessage, timeout time.Duration) (Activity, error) {
	var c activityConfig
	if err := kind.DecodeConfig(raw, &c, ActivityKind); err != nil {
		return Activity{}, err
	}
	for _, f := range []struct{ name, v string }{{"task_queue", c.TaskQueue}, {"activity_type", c.ActivityType}} {
		if f.v == "" || len(f.v) > 1000 {
			return Activity{}, agent.Errorf(agent.CodeInvalid, "%s config: %s is required, at most 1000 bytes", ActivityKind, f.name)
		}
	}
	for _, f := range []struct {
		name    string
		v, most int
	}{{"start_to_close_sec", c.StartToCloseSec, 86400}, {"heartbeat_sec", c.HeartbeatSec, 3600}, {"max_attempts", c.MaxAttempts, 100}} {
		if f.v < 0 || f.v > f.most {
			return Activity{}, agent.Errorf(agent.CodeInvalid, "%s config: %s is %d, want 1 to %d", ActivityKind, f.name, f.v, f.most)
		}
	}
	a := Activity{TaskQueue: c.TaskQueue, ActivityType: c.ActivityType, StartToClose: timeout,
		Heartbeat: time.Duration(c.HeartbeatSec) * time.Second, MaxAttempts: defaultAttempts}
	if c.StartToCloseSec > 0 {
		a.StartToClose = time.Duration(c.StartToCloseSec) * time.Second
	}
	if c.MaxAttempts > 0 {
		a.MaxAttempts = c.MaxAttempts
	}
	return a, nil
}

// Admit refuses an entry naming a queue or a type the operator did not
// open to the tenant, naming the config field.
func (a Activity) Admit(p *reach.Policy, tenantID string) error {
	if err := p.Check(tenantID, "config.task_queue", reach.Target{Kind: reach.TaskQueue, Name: a.TaskQueue}); err != nil {
		return err
	}
	return p.Check(tenantID, "config.activity_type", reach.Target{Kind: reach.Activity, Name: a.ActivityType})
}

// String names the call's target, for summaries and logs.
func (a Activity) String() string {
	return fmt.Sprintf("%s on %s", a.ActivityType, a.TaskQueue)
}
