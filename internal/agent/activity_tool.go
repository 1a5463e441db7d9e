package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// KindActivity is the tool kind whose calls are activities of a team's
// own worker: the turn schedules each call on the entry's task queue,
// where that worker (any SDK) polls it, and waits for its result.
const KindActivity = "activity"

// ActivityTool is an activity tool's entry, checked: where the turn
// schedules a call and with what options.
type ActivityTool struct {
	TaskQueue    string
	ActivityType string
	// StartToClose bounds an attempt; Heartbeat, when set, how long the
	// activity may go without heartbeating.
	StartToClose, Heartbeat time.Duration
	// MaxAttempts is how many attempts Temporal makes at most.
	MaxAttempts int
}

// activityToolConfig is the entry's config as a catalog writes it.
type activityToolConfig struct {
	TaskQueue       string `json:"task_queue"`
	ActivityType    string `json:"activity_type"`
	StartToCloseSec int    `json:"start_to_close_sec,omitempty"`
	HeartbeatSec    int    `json:"heartbeat_sec,omitempty"`
	MaxAttempts     int    `json:"max_attempts,omitempty"`
}

// DefaultActivityAttempts is the attempts of an activity tool whose
// entry declares delivery: idempotent and no max_attempts: a few, since
// its activity deduplicates by the call's key, and a retry is how a
// worker that died mid-call is recovered. Every other activity tool is
// delivered at most once (one attempt), the rule of every tool kind
// whose far side may not deduplicate: an attempt that timed out may
// have taken effect, so the call's outcome is unknown, not sent again.
const DefaultActivityAttempts = 3

// ScheduledKind reports whether the turn itself schedules the calls of
// tools of kind k on a team's worker (the tool runtime never runs them).
func ScheduledKind(k string) bool {
	return k == KindActivity || k == KindWorkflow || k == KindNexus
}

// ParseActivityTool checks an activity entry's config; timeout is the
// tool's call timeout, an attempt's default start-to-close; idempotent,
// whether the entry declares delivery: idempotent, which alone allows
// more than one attempt. The turn reads it in workflow code: it only
// decodes and checks.
func ParseActivityTool(raw json.RawMessage, timeout time.Duration, idempotent bool) (ActivityTool, error) {
	var c activityToolConfig
	if err := decodeConfig(KindActivity, raw, &c, "task_queue and activity_type"); err != nil {
		return ActivityTool{}, err
	}
	if err := requireNames(KindActivity, [2]string{"task_queue", c.TaskQueue}, [2]string{"activity_type", c.ActivityType}); err != nil {
		return ActivityTool{}, err
	}
	for _, f := range []struct {
		name    string
		v, most int
	}{{"start_to_close_sec", c.StartToCloseSec, 86400}, {"heartbeat_sec", c.HeartbeatSec, 3600}, {"max_attempts", c.MaxAttempts, 100}} {
		if f.v < 0 || f.v > f.most {
			return ActivityTool{}, Errorf(CodeInvalid, "%s config: %s is %d, want 1 to %d", KindActivity, f.name, f.v, f.most)
		}
	}
	if c.MaxAttempts > 1 && !idempotent {
		return ActivityTool{}, Errorf(CodeInvalid, "%s config: max_attempts %d sends a call again after an attempt that may have taken effect: declare delivery: %s (the activity deduplicates by the call's key), or leave it at 1",
			KindActivity, c.MaxAttempts, DeliveryIdempotent)
	}
	a := ActivityTool{TaskQueue: c.TaskQueue, ActivityType: c.ActivityType, StartToClose: timeout,
		Heartbeat: time.Duration(c.HeartbeatSec) * time.Second, MaxAttempts: 1}
	if idempotent {
		a.MaxAttempts = DefaultActivityAttempts
	}
	if c.StartToCloseSec > 0 {
		a.StartToClose = time.Duration(c.StartToCloseSec) * time.Second
	}
	if c.MaxAttempts > 0 {
		a.MaxAttempts = c.MaxAttempts
	}
	return a, nil
}

// String names the call's target, for summaries and logs.
func (a ActivityTool) String() string {
	return fmt.Sprintf("%s on %s", a.ActivityType, a.TaskQueue)
}

// decodeConfig decodes a scheduled kind's config into v, strictly; an
// entry with none is told what it needs (required).
func decodeConfig(kind string, raw json.RawMessage, v any, required string) error {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Errorf(CodeInvalid, "%s config: %s are required", kind, required)
	}
	if err := decodeStrict(raw, v); err != nil {
		return Errorf(CodeInvalid, "%s config: %v", kind, err)
	}
	return nil
}

// requireNames checks the names a scheduled kind's config must give
// (field, value): each set, and at most 1000 bytes.
func requireNames(kind string, names ...[2]string) error {
	for _, f := range names {
		if f[1] == "" || len(f[1]) > 1000 {
			return Errorf(CodeInvalid, "%s config: %s is required, at most 1000 bytes", kind, f[0])
		}
	}
	return nil
}
