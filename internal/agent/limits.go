package agent

import "time"

// Limits bound a turn. Zero values mean "use the default" (see Defaults).
type Limits struct {
	// MaxIterations is the number of model calls a turn may make.
	MaxIterations int `json:"max_iterations,omitempty"`
	// TurnTimeoutSec bounds the whole turn, model and tool calls included.
	TurnTimeoutSec int `json:"turn_timeout_sec,omitempty"`
	// TokenBudget caps the total tokens (prompt + completion) of a turn; 0 = none.
	TokenBudget int `json:"token_budget,omitempty"`
	// ApprovalTimeoutSec bounds the wait for a human decision on a tool call.
	ApprovalTimeoutSec int `json:"approval_timeout_sec,omitempty"`
	// MaxOutputTokens is passed to the model per call; 0 = provider default.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// TurnsPerMinute caps the turns the agent starts per minute (per
	// tenant); more are rejected with RateLimited. 0 = no cap.
	TurnsPerMinute int `json:"turns_per_minute,omitempty"`
	// ModelPriority orders the agent's model calls among those waiting
	// for a provider's limits (AGENTFLOW_MODEL_LIMITS): 1 first, 5 last;
	// 0 = 3.
	ModelPriority int `json:"model_priority,omitempty"`
	// HistoryEvents is how many events a run of a turn's workflow holds
	// before the turn continues as new, at its next step boundary: one
	// turn, any number of steps, each run's history bounded. 0 =
	// DefaultHistoryEvents; at least MinHistoryEvents.
	HistoryEvents int `json:"history_events,omitempty"`
	// ModelTimeoutSec bounds each attempt of each of the turn's model
	// calls: an attempt that runs longer fails as a timed-out call,
	// which is retried (and falls back, after its last attempt, as the
	// agent's fallback_on says of Unavailable). At most
	// MaxModelTimeoutSec and the turn's timeout, and the operator's
	// limit (the worker's AGENTFLOW_MAX_MODEL_TIMEOUT) lowers it. 0: the
	// turn's timeout, or the operator's limit when lower.
	ModelTimeoutSec int `json:"model_timeout_sec,omitempty"`
}

// MaxModelTimeoutSec bounds Limits.ModelTimeoutSec.
const MaxModelTimeoutSec = 3600

// ModelTimeout is how long one attempt of a model call may take: the
// agent's model timeout, or the turn's when it sets none or a longer
// one.
func (l Limits) ModelTimeout() time.Duration {
	turn := l.WithDefaults().TurnTimeout()
	if d := time.Duration(l.ModelTimeoutSec) * time.Second; d > 0 && d < turn {
		return d
	}
	return turn
}

// CapModelTimeout lowers the model timeout to max, the operator's limit
// (0: none): what a turn pins is the timeout it runs with.
func (l Limits) CapModelTimeout(max time.Duration) Limits {
	if max <= 0 {
		return l
	}
	if sec := int(max / time.Second); sec > 0 && (l.ModelTimeoutSec == 0 || l.ModelTimeoutSec > sec) {
		l.ModelTimeoutSec = sec
	}
	return l
}

// Default limits, used where an agent leaves a field at zero.
const (
	DefaultMaxIterations      = 8
	DefaultTurnTimeoutSec     = 300
	DefaultApprovalTimeoutSec = 3600
	// A run of 5,000 events is about 700 steps of one tool call, and
	// 2 MB: far inside Temporal's 51,200 events and 50 MB, and small
	// enough that replaying a run (a worker taking a turn over, a query
	// of a closed run) stays cheap.
	DefaultHistoryEvents = 5000
	MinHistoryEvents     = 100
)

// WithDefaults returns l with zero fields replaced by the defaults.
func (l Limits) WithDefaults() Limits {
	l.MaxIterations = OrDefault(l.MaxIterations, DefaultMaxIterations)
	l.TurnTimeoutSec = OrDefault(l.TurnTimeoutSec, DefaultTurnTimeoutSec)
	l.ApprovalTimeoutSec = OrDefault(l.ApprovalTimeoutSec, DefaultApprovalTimeoutSec)
	l.HistoryEvents = max(OrDefault(l.HistoryEvents, DefaultHistoryEvents), MinHistoryEvents)
	return l
}

// OrDefault is v when it is set (above zero), else def: the rule of every
// limit that has a default.
func OrDefault[T ~int | ~int32 | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// TurnTimeout is the limit as a duration.
func (l Limits) TurnTimeout() time.Duration { return time.Duration(l.TurnTimeoutSec) * time.Second }
