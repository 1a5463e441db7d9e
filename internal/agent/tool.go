package agent

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"
)

// Approval policies for a tool call. Anything else is a CEL expression over
// the call's arguments and the turn's context.
const (
	ApprovalNever  = "never"
	ApprovalAlways = "always"
)

// Tool is a tool as bound to an agent: what the model sees (name,
// description, JSON Schema of the arguments) and how it runs (kind, config).
type Tool struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"` // the builder that implements it, e.g. "calculator"
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema object
	Approval    string          `json:"approval,omitempty"`   // never (default) | always | CEL
	Config      json.RawMessage `json:"config,omitempty"`     // kind-specific settings
	// Execution is ToolLocal for tools whose calls run as local
	// activities; empty means a regular activity.
	Execution string `json:"execution,omitempty"`
	// Source is the catalog entry the tool was built from when that is not
	// the tool's own (one entry may yield several tools); FromToolkit is
	// the toolkit that granted it to the agent (empty: listed by name).
	Source      string `json:"source,omitempty"`
	FromToolkit string `json:"from_toolkit,omitempty"`
	// RateLimit bounds the calls of the catalog entry's tools, for the
	// whole tenant across workers: a call over it waits.
	RateLimit *ToolRateLimit `json:"rate_limit,omitempty"`
	// TimeoutSec bounds one attempt of one of the tool's calls (its
	// ExecuteTool's start-to-close timeout), for every kind alike: 1 to
	// MaxToolTimeoutSec; 0: DefaultToolTimeout. A turn's timeout, and the
	// operator's limit, lower it (CallTimeout).
	TimeoutSec int `json:"timeout_sec,omitempty"`
	// Delivery says whether the far side of the tool's writes
	// deduplicates them: DeliveryIdempotent, DeliveryReconciled (with
	// Reconcile), or DeliveryAtMostOnce ("" means it, the default), by
	// internal/effects's rule.
	Delivery string `json:"delivery,omitempty"`
	// Reconcile, with DeliveryReconciled, is how a call whose write may
	// or may not have taken effect is answered: from a read.
	Reconcile *ToolReconcile `json:"reconcile,omitempty"`
	// Version and SpecHash name the definition (ToolVersion): the store
	// sets them when it stores an agent version, from the tenant's
	// tool_versions; what a catalog document says of them is not read.
	Version  int    `json:"version,omitempty"`
	SpecHash string `json:"spec_hash,omitempty"`
}

// A tool's delivery (Tool.Delivery): how a retried call treats a write
// an earlier attempt may have sent (internal/effects).
const (
	// DeliveryAtMostOnce: each write's intent is recorded before it
	// leaves, and a write an earlier attempt may have sent is not sent
	// again; the call's outcome is then unknown (ToolUnknown).
	DeliveryAtMostOnce = "at_most_once"
	// DeliveryIdempotent: the far side deduplicates, so a retry sends
	// again, with the same key.
	DeliveryIdempotent = "idempotent"
	// DeliveryReconciled: at most once, and a call whose outcome is
	// unknown is answered from a read of the far side (Tool.Reconcile):
	// the read's answer when the write took effect, "not made" when it
	// did not. The write is never sent again.
	DeliveryReconciled = "reconciled"
)

// ToolReconcile is a reconciled tool's read: a call of Tool (the tool
// itself when empty; an OpenAPI entry's read operation, say) with the
// arguments Arguments makes, and Found, which says from its answer
// whether the write took effect. Both are jq programs; Arguments reads
// {"args": the call's arguments, "key": its idempotency key} and makes
// the read's arguments (an object; no output: the call stays unknown),
// Found reads the same with "answer", the read's JSON answer, and is
// true when the write took effect.
type ToolReconcile struct {
	Tool      string `json:"tool,omitempty"`
	Arguments string `json:"arguments"`
	Found     string `json:"found"`
	// Spec is Tool's definition, pinned when the catalog is applied (as
	// a tool guard's is); nil when the tool reads with itself.
	Spec *Tool `json:"spec,omitempty"`
}

// Bounds of a tool call's timeout (Tool.TimeoutSec).
const (
	DefaultToolTimeout = 2 * time.Minute
	MaxToolTimeoutSec  = 3600
)

// CallTimeout is how long one attempt of a call of the tool may run: its
// TimeoutSec, or DefaultToolTimeout, no longer than turn (the turn's
// timeout; 0: no bound).
func (t Tool) CallTimeout(turn time.Duration) time.Duration {
	d := DefaultToolTimeout
	if t.TimeoutSec > 0 {
		d = time.Duration(t.TimeoutSec) * time.Second
	}
	if turn > 0 && turn < d {
		return turn
	}
	return d
}

// CapToolTimeouts lowers each tool's timeout to max, the operator's limit
// (0: none): what a turn pins is the timeout its calls run with.
func (a Agent) CapToolTimeouts(max time.Duration) Agent {
	sec := int(max / time.Second)
	if sec <= 0 {
		return a
	}
	var tools []Tool
	for i, t := range a.Tools {
		if t.CallTimeout(0) <= time.Duration(sec)*time.Second {
			continue
		}
		if tools == nil {
			tools = slices.Clone(a.Tools)
		}
		tools[i].TimeoutSec = sec
	}
	if tools != nil {
		a.Tools = tools
	}
	return a
}

// ToolRateLimit bounds a tool entry's calls: so many a minute, so many at
// once (0: no bound).
type ToolRateLimit struct {
	PerMinute  int `json:"per_minute,omitempty"`
	Concurrent int `json:"concurrent,omitempty"`
}

// Entry is the catalog entry the tool comes from: Source, or its own name.
func (t Tool) Entry() string {
	return cmp.Or(t.Source, t.Name)
}

// Toolkit is a named set of a tenant's tools: an agent that lists it is
// granted all of them.
type Toolkit struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tools       []string `json:"tools"`
}

// Tool executions. A local tool's call runs as a local activity, inside
// the workflow task that scheduled it: no task queue round trip and one
// history event instead of six, for calls that are quick and in-process
// (a calculator). Slow or remote tools stay activities, which survive the
// worker and have their own timeouts.
const (
	ToolLocal    = "local"
	ToolActivity = "activity"
)

// IsLocal reports whether the tool's calls run as local activities.
func (t Tool) IsLocal() bool { return t.Execution == ToolLocal }
