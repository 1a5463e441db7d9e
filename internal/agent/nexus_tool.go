package agent

import (
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
	if err := decodeConfig(KindNexus, raw, &c, "endpoint, service and operation"); err != nil {
		return NexusTool{}, err
	}
	if err := requireNames(KindNexus, [2]string{"endpoint", c.Endpoint}, [2]string{"service", c.Service}, [2]string{"operation", c.Operation}); err != nil {
		return NexusTool{}, err
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
