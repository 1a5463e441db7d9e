package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/words"
)

// Spans of model and tool calls follow OpenTelemetry's GenAI semantic
// conventions. They are children of the activity's RunActivity span and
// come from that span's provider, so they exist exactly when the worker
// traces. Prompts, replies, tool arguments and tool output are recorded
// only when GenAI is told to record content, cut to MaxTraceContent
// bytes each.
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

	AttrTenant       = "agentflow.tenant"
	AttrAgentID      = "agentflow.agent.id"
	attrAgentVersion = "agentflow.agent.version"
	attrSession      = "agentflow.session"
	attrJob          = "agentflow.job"
	attrToolKind     = "agentflow.tool.kind"
	attrToolStatus   = "agentflow.tool.status"

	opChat        = "chat"
	opExecuteTool = "execute_tool"

	// MaxTraceContent bounds each content attribute of a span.
	MaxTraceContent = 16 << 10
)

// tracer is the tracer of ctx's span's provider: a no-op one when the
// activity is not traced.
func tracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(ScopeName)
}

// GenAI is the hook that traces model and tool calls: a "chat <model>"
// span around each model call (the call, and what the span records of
// its reply, are the reply as it is stored, past the output guard), an
// "execute_tool <tool>" span around each tool call. content records
// prompts, replies, tool arguments and output (AGENTFLOW_TRACE_CONTENT).
func GenAI(content bool) hooks.Handler {
	return hooks.Handler{
		Name: "tracing",
		ModelStart: func(ctx context.Context, c *hooks.ModelCall) (context.Context, error) {
			return startChat(ctx, c, content), nil
		},
		ModelEnd: func(ctx context.Context, _ *hooks.ModelCall, r *hooks.ModelReply) {
			span := spanOf(ctx, chatSpan{})
			traceReply(span, r, content)
			span.End()
		},
		ModelError: func(ctx context.Context, _ *hooks.ModelCall, err error) { endFailed(spanOf(ctx, chatSpan{}), err) },
		ToolStart: func(ctx context.Context, c *hooks.ToolCall) (context.Context, error) {
			return startTool(ctx, c, content), nil
		},
		ToolEnd: func(ctx context.Context, _ *hooks.ToolCall, r *hooks.ToolResult) {
			span := spanOf(ctx, toolSpan{})
			span.SetAttributes(attribute.String(attrToolStatus, agent.ToolOK))
			if content && span.IsRecording() {
				span.SetAttributes(attribute.String(attrToolResult, words.Clip(r.Text, MaxTraceContent)))
			}
			span.End()
		},
		// A result the model reads as an error (bad arguments, say) is
		// an error of the call too.
		ToolError: func(ctx context.Context, _ *hooks.ToolCall, err error) {
			span := spanOf(ctx, toolSpan{})
			span.SetAttributes(attribute.String(attrToolStatus, agent.ToolError))
			endFailed(span, err)
		},
	}
}

// startChat starts a model call's span.
func startChat(ctx context.Context, c *hooks.ModelCall, content bool) context.Context {
	provider, model, _ := strings.Cut(c.Model, ":")
	ctx, span := tracer(ctx).Start(ctx, opChat+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(attrOperation, opChat),
		attribute.String(attrSystem, provider),
		attribute.String(attrProvider, provider),
		attribute.String(attrRequestModel, model),
		attribute.String(AttrTenant, c.TenantID),
		attribute.String(AttrAgentID, c.AgentID),
		attribute.Int(attrAgentVersion, c.AgentVersion),
		attribute.String(attrJob, c.JobID),
	))
	if c.SessionID != "" {
		span.SetAttributes(attribute.String(attrSession, c.SessionID))
	}
	if content && span.IsRecording() {
		span.SetAttributes(attribute.String(attrInputMessages, ContentJSON(c.Messages)))
	}
	return context.WithValue(ctx, chatSpan{}, span)
}

// startTool starts a tool call's span.
func startTool(ctx context.Context, c *hooks.ToolCall, content bool) context.Context {
	ctx, span := tracer(ctx).Start(ctx, opExecuteTool+" "+c.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(attrOperation, opExecuteTool),
		attribute.String(attrToolName, c.Name),
		attribute.String(attrToolCallID, c.ID),
		attribute.String(attrToolType, "function"),
		attribute.String(attrToolKind, c.Kind),
		attribute.String(AttrTenant, c.TenantID),
		attribute.String(AttrAgentID, c.AgentID),
		attribute.Int(attrAgentVersion, c.AgentVersion),
		attribute.String(attrJob, c.JobID),
	))
	if content && span.IsRecording() {
		span.SetAttributes(attribute.String(attrToolArguments, words.Clip(string(c.Arguments), MaxTraceContent)))
	}
	return context.WithValue(ctx, toolSpan{}, span)
}

// traceReply records a model's reply on its call's span.
func traceReply(span trace.Span, r *hooks.ModelReply, content bool) {
	_, respModel, ok := strings.Cut(r.Model, ":")
	if !ok {
		respModel = r.Model
	}
	span.SetAttributes(
		attribute.String(attrResponseModel, respModel),
		attribute.Int(attrInputTokens, r.Usage.PromptTokens),
		attribute.Int(attrOutputTokens, r.Usage.CompletionTokens),
	)
	if r.Usage.CachedTokens > 0 {
		span.SetAttributes(attribute.Int(attrCachedTokens, r.Usage.CachedTokens))
	}
	if r.Usage.ReasoningTokens > 0 {
		span.SetAttributes(attribute.Int(attrReasonTokens, r.Usage.ReasoningTokens))
	}
	if r.FinishReason != "" {
		span.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{r.FinishReason}))
	}
	if content && span.IsRecording() {
		span.SetAttributes(attribute.String(attrOutputMessages, ContentJSON([]agent.Message{r.Message})))
	}
}

// chatSpan and toolSpan keep the hook's own spans in the call's context:
// another hook's start may put a span of its own in front of them.
type (
	chatSpan struct{}
	toolSpan struct{}
)

// spanOf is the span GenAI started under key, or a no-op span.
func spanOf(ctx context.Context, key any) trace.Span {
	if s, ok := ctx.Value(key).(trace.Span); ok {
		return s
	}
	return trace.SpanFromContext(context.Background())
}

// endFailed marks span failed with the error's code and ends it: an
// error's message may quote what the user or the model wrote, its code
// does not.
func endFailed(span trace.Span, err error) {
	code := ErrorType(err)
	span.SetAttributes(attribute.String(attrErrorType, code))
	span.SetStatus(codes.Error, code)
	span.End()
}

// ErrorType is err's agent code, or the convention's "_OTHER".
func ErrorType(err error) string {
	if ae, ok := errors.AsType[*agent.Error](err); ok && ae.Code != "" {
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

// ContentJSON is messages in the shape of the convention's
// gen_ai.input.messages, cut to MaxTraceContent bytes.
func ContentJSON(msgs []agent.Message) string {
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
	return words.Clip(string(b), MaxTraceContent)
}
