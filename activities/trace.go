package activities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools"
)

// Spans of model and tool calls follow OpenTelemetry's GenAI semantic
// conventions. They are children of the activity's RunActivity span and
// come from that span's provider, so they exist exactly when the worker
// traces. Prompts, replies, tool arguments and tool output are recorded
// only with Deps.TraceContent, cut to maxTraceContent bytes each.
const (
	attrOperation      = "gen_ai.operation.name"
	attrSystem         = "gen_ai.system" // the convention's older name of gen_ai.provider.name, still what most backends read
	attrProvider       = "gen_ai.provider.name"
	attrRequestModel   = "gen_ai.request.model"
	attrResponseModel  = "gen_ai.response.model"
	attrInputTokens    = "gen_ai.usage.input_tokens"
	attrOutputTokens   = "gen_ai.usage.output_tokens"
	attrCachedTokens   = "gen_ai.usage.cache_read.input_tokens"
	attrReasonTokens   = "agentflow.usage.reasoning_tokens"
	attrFinishReasons  = "gen_ai.response.finish_reasons"
	attrInputMessages  = "gen_ai.input.messages"
	attrOutputMessages = "gen_ai.output.messages"
	attrToolName       = "gen_ai.tool.name"
	attrToolCallID     = "gen_ai.tool.call.id"
	attrToolType       = "gen_ai.tool.type"
	attrToolArguments  = "gen_ai.tool.call.arguments"
	attrToolResult     = "gen_ai.tool.call.result"
	attrErrorType      = "error.type"

	attrTenant       = "agentflow.tenant"
	attrAgentID      = "agentflow.agent.id"
	attrAgentVersion = "agentflow.agent.version"
	attrSession      = "agentflow.session"
	attrJob          = "agentflow.job"
	attrRouteRule    = "agentflow.route.rule"
	attrToolKind     = "agentflow.tool.kind"
	attrToolStatus   = "agentflow.tool.status"

	opChat        = "chat"
	opExecuteTool = "execute_tool"

	maxTraceContent = 16 << 10
)

// tracer is the tracer of ctx's span's provider: a no-op one when the
// activity is not traced.
func tracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(telemetry.ScopeName)
}

// log is the activities' logger with the trace and span ids of ctx's
// span, when one is recording.
func (a *Activities) log(ctx context.Context) *zap.Logger { return telemetry.Logger(ctx, a.logger) }

// traced runs stages inside the call's "chat <model>" span: the model
// call, and what the span records of its reply, are the reply as it is
// stored, past the output guard.
func (m *modelCall) traced(stages ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		in := m.in
		provider, model, _ := strings.Cut(m.ag.Model, ":")
		ctx, span := tracer(ctx).Start(ctx, opChat+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String(attrOperation, opChat),
			attribute.String(attrSystem, provider),
			attribute.String(attrProvider, provider),
			attribute.String(attrRequestModel, model),
			attribute.String(attrTenant, in.TenantID),
			attribute.String(attrAgentID, in.AgentID),
			attribute.Int(attrAgentVersion, in.AgentVersion),
			attribute.String(attrJob, in.JobID),
		))
		defer span.End()
		if in.SessionID != "" {
			span.SetAttributes(attribute.String(attrSession, in.SessionID))
		}
		if m.a.traceContent && span.IsRecording() {
			span.SetAttributes(attribute.String(attrInputMessages, contentJSON(m.msgs)))
		}
		for _, stage := range stages {
			if err := stage(ctx); err != nil {
				failSpan(span, err)
				return err
			}
		}
		m.a.traceReply(span, m.resp)
		return nil
	}
}

// traceReply records a model's reply on its call's span.
func (a *Activities) traceReply(span trace.Span, resp *llm.Response) {
	_, respModel, ok := strings.Cut(resp.Model, ":")
	if !ok {
		respModel = resp.Model
	}
	span.SetAttributes(
		attribute.String(attrResponseModel, respModel),
		attribute.Int(attrInputTokens, resp.Usage.PromptTokens),
		attribute.Int(attrOutputTokens, resp.Usage.CompletionTokens),
	)
	if resp.Usage.CachedTokens > 0 {
		span.SetAttributes(attribute.Int(attrCachedTokens, resp.Usage.CachedTokens))
	}
	if resp.Usage.ReasoningTokens > 0 {
		span.SetAttributes(attribute.Int(attrReasonTokens, resp.Usage.ReasoningTokens))
	}
	if resp.FinishReason != "" {
		span.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{resp.FinishReason}))
	}
	if a.traceContent && span.IsRecording() {
		span.SetAttributes(attribute.String(attrOutputMessages, contentJSON([]agent.Message{resp.Message})))
	}
}

// startToolSpan starts the "execute_tool <tool>" span of a call; end it
// with endToolSpan.
func (a *Activities) startToolSpan(ctx context.Context, in contract.ExecuteToolInput, spec agent.Tool) (context.Context, trace.Span) {
	ctx, span := tracer(ctx).Start(ctx, opExecuteTool+" "+in.Call.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(attrOperation, opExecuteTool),
		attribute.String(attrToolName, in.Call.Name),
		attribute.String(attrToolCallID, in.Call.ID),
		attribute.String(attrToolType, "function"),
		attribute.String(attrToolKind, spec.Kind),
		attribute.String(attrTenant, in.TenantID),
		attribute.String(attrAgentID, in.AgentID),
		attribute.Int(attrAgentVersion, in.AgentVersion),
		attribute.String(attrJob, in.JobID),
	))
	if a.traceContent && span.IsRecording() {
		span.SetAttributes(attribute.String(attrToolArguments, agent.Clip(in.Call.Arguments, maxTraceContent)))
	}
	return ctx, span
}

// endToolSpan records how the call went and ends its span. A result the
// model reads as an error (bad arguments, say) is an error of the call
// too.
func (a *Activities) endToolSpan(span trace.Span, out tools.Output, err error) {
	defer span.End()
	switch {
	case err != nil:
		span.SetAttributes(attribute.String(attrToolStatus, agent.ToolError))
		failSpan(span, err)
	default:
		span.SetAttributes(attribute.String(attrToolStatus, agent.ToolOK))
		if a.traceContent && span.IsRecording() {
			span.SetAttributes(attribute.String(attrToolResult, agent.Clip(out.Text, maxTraceContent)))
		}
	}
}

// traceRoute records the routing decision on the Route activity's span.
func traceRoute(ctx context.Context, tenantID string, d contract.RouteResult) {
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.String(attrTenant, tenantID),
		attribute.String(attrAgentID, d.AgentID),
		attribute.String(attrRouteRule, d.Rule),
	)
}

// failSpan marks span failed with the error's code: an error's message
// may quote what the user or the model wrote, its code does not.
func failSpan(span trace.Span, err error) {
	code := errorType(err)
	span.SetAttributes(attribute.String(attrErrorType, code))
	span.SetStatus(codes.Error, code)
}

// errorType is err's agent code, or the convention's "_OTHER".
func errorType(err error) string {
	var ae *agent.Error
	if errors.As(err, &ae) && ae.Code != "" {
		return string(ae.Code)
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "_OTHER"
}

// contentJSON is messages in the shape of the convention's
// gen_ai.input.messages, cut to maxTraceContent bytes.
func contentJSON(msgs []agent.Message) string {
	type part struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		msg := message{Role: string(m.Role), Parts: []part{}}
		switch {
		case m.Role == agent.RoleTool:
			msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			msg.Parts = append(msg.Parts, part{Type: "text", Content: m.Content})
		}
		for _, c := range m.ToolCalls {
			var args json.RawMessage
			if json.Valid([]byte(c.Arguments)) {
				args = json.RawMessage(c.Arguments)
			}
			msg.Parts = append(msg.Parts, part{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
		}
		out = append(out, msg)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return agent.Clip(string(b), maxTraceContent)
}
