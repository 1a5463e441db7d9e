package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// KindNexus is the tool kind whose calls are operations of a Nexus
// service on an endpoint: code of another team, in another namespace,
// behind a contract. The turn starts the operation (sync or async) and
// waits for its result; the endpoint, not the turn, decides where it runs.
const KindNexus = "nexus"

// NexusTool is a nexus tool's entry, checked.
type NexusTool struct {
	Endpoint, Service, Operation string
	// ScheduleToClose bounds the operation, start to result.
	ScheduleToClose time.Duration
}

// nexusToolConfig is the entry's config as a catalog writes it.
type nexusToolConfig struct {
	Endpoint           string `json:"endpoint"`
	Service            string `json:"service"`
	Operation          string `json:"operation"`
	ScheduleToCloseSec int    `json:"schedule_to_close_sec,omitempty"`
}

// ParseNexusTool checks a nexus entry's config; timeout is the tool's
// call timeout, the operation's default schedule-to-close timeout. The
// turn reads it in workflow code: it only decodes and checks.
func ParseNexusTool(raw json.RawMessage, timeout time.Duration) (NexusTool, error) {
	var c nexusToolConfig
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return NexusTool{}, Errorf(CodeInvalid, "%s config: endpoint, service and operation are required", KindNexus)
	}
	if err := decodeStrict(raw, &c); err != nil {
		return NexusTool{}, Errorf(CodeInvalid, "%s config: %v", KindNexus, err)
	}
	for _, f := range []struct{ name, v string }{{"endpoint", c.Endpoint}, {"service", c.Service}, {"operation", c.Operation}} {
		if f.v == "" || len(f.v) > 1000 {
			return NexusTool{}, Errorf(CodeInvalid, "%s config: %s is required, at most 1000 bytes", KindNexus, f.name)
		}
	}
	if c.ScheduleToCloseSec < 0 || c.ScheduleToCloseSec > MaxWorkflowToolSec {
		return NexusTool{}, Errorf(CodeInvalid, "%s config: schedule_to_close_sec is %d, want 1 to %d", KindNexus, c.ScheduleToCloseSec, MaxWorkflowToolSec)
	}
	n := NexusTool{Endpoint: c.Endpoint, Service: c.Service, Operation: c.Operation, ScheduleToClose: timeout}
	if c.ScheduleToCloseSec > 0 {
		n.ScheduleToClose = time.Duration(c.ScheduleToCloseSec) * time.Second
	}
	return n, nil
}

// String names the call's target, for summaries and logs.
func (n NexusTool) String() string {
	return fmt.Sprintf("operation %s/%s on endpoint %s", n.Service, n.Operation, n.Endpoint)
}
