package activities

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// Model and tool calls are traced by a hook (telemetry.GenAI), as every
// concern around them is (internal/hooks); the Route activity's span is
// the activity's own.

const attrRouteRule = "agentflow.route.rule"

// log is the activities' logger with the trace and span ids of ctx's
// span, when one is recording.
func (a *Activities) log(ctx context.Context) *zap.Logger { return telemetry.Logger(ctx, a.logger) }

// traceRoute records the routing decision on the Route activity's span.
func traceRoute(ctx context.Context, tenantID string, d contract.RouteResult) {
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.String(telemetry.AttrTenant, tenantID),
		attribute.String(telemetry.AttrAgentID, d.AgentID),
		attribute.String(attrRouteRule, d.Rule),
	)
}
