package contract

// Metrics AgentTurn reports through workflow.GetMetricsHandler. Operators
// write these names in dashboards and alerts, so they never change. They
// are declared here, not beside the exporter (internal/metrics), so that
// the workflow package links no Prometheus, OpenTelemetry SDK or zap for
// the sake of a few strings.
//
// The exporter appends the unit and _total: turns is turns_total,
// agent_latency (a timer, in seconds) agent_latency_seconds. The labels
// each one carries are set in workflows/metrics.go;
// docs/reference/observability.md lists them.
const (
	// MetricTurns counts turns by how they ended.
	MetricTurns = "turns"
	// MetricAgentLatency times a turn from its start to its end.
	MetricAgentLatency = "agent_latency"
	// MetricModelTokens counts the tokens of model calls by kind.
	MetricModelTokens = "model_tokens"
	// MetricModelCalls counts model calls by whether the provider read
	// part of the prompt from its prompt cache.
	MetricModelCalls = "model_calls"
	// MetricToolInvocations counts tool calls by outcome.
	MetricToolInvocations = "tool_invocations"
	// MetricApprovals counts decisions on calls waiting for approval.
	MetricApprovals = "approvals"
	// MetricApprovalWait times how long a call waited for its decision.
	MetricApprovalWait = "approval_wait"
	// MetricRoutingMismatch counts requests routed badly or not at all.
	MetricRoutingMismatch = "routing_mismatch"
	// MetricGuardrails counts what guardrails found in turns (reported by
	// the activities): by tenant, guard (pii, injection, output, http,
	// moderation) and outcome (redacted, tripped, refused, or an
	// injection guard's action).
	MetricGuardrails = "guardrail_findings"
)
