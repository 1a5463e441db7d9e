package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// The anthropic provider speaks the Messages API through Anthropic's own
// SDK. langchaingo v0.1.14's client could not carry what agents need of
// it: it drops a streamed thinking block's signature (signature_delta),
// cannot send a thinking block back (Anthropic requires it, signed, with
// the tool results that follow it), sends only the first block of an
// assistant message, takes tool results as strings only (no images), and
// never streams tool arguments (input_json_delta).

// defaultAnthropicMaxTokens is sent when the agent sets no
// max_output_tokens: the Messages API requires one.
const defaultAnthropicMaxTokens = 4096

// anthropicClient builds the SDK client. baseURL is agentflow's
// ANTHROPIC_BASE_URL, which names the API's /v1 (as it did for the
// client before); the SDK adds v1/messages itself. Retries are
// Temporal's: the SDK makes none.
func anthropicClient(apiKey, baseURL string, hc *http.Client) anthropic.Client {
	base := strings.TrimSuffix(baseURL, "/")
	base = strings.TrimSuffix(base, "/v1") + "/"
	return anthropic.NewClient(option.WithAPIKey(apiKey), option.WithBaseURL(base),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
}

// generateAnthropic makes one Messages API call.
func (r *Router) generateAnthropic(ctx context.Context, p *provider, modelName, fullName string, req Request, messages []agent.Message) (*Response, error) {
	params, err := anthropicParams(ctx, modelName, req, messages)
	if err != nil {
		return nil, err
	}
	st := &callState{}
	ctx = withCallState(ctx, st)
	if req.OnText == nil && req.OnChunk == nil {
		msg, err := p.anthropic.Messages.New(ctx, params)
		if err != nil {
			return nil, r.failure(ctx, fullName, st, err)
		}
		return fromAnthropic(msg, fullName), nil
	}

	stream := p.anthropic.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var acc anthropic.Message
	c := &chunker{req: req, st: st}
	calls := map[int64]ToolCallDelta{} // content block index → its tool call
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, &Error{Model: fullName, Retryable: true, Message: r.redact(err.Error())}
		}
		var cerr error
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				d := ToolCallDelta{Index: len(calls), ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}
				calls[ev.Index] = d
				cerr = c.emit(ctx, Chunk{Kind: ChunkToolCall, ToolCall: d})
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					cerr = c.emit(ctx, Chunk{Kind: ChunkText, Text: ev.Delta.Text})
				}
			case "thinking_delta":
				if ev.Delta.Thinking != "" {
					cerr = c.emit(ctx, Chunk{Kind: ChunkReasoning, Text: ev.Delta.Thinking})
				}
			case "input_json_delta":
				if d, ok := calls[ev.Index]; ok && ev.Delta.PartialJSON != "" {
					d.Args = ev.Delta.PartialJSON
					cerr = c.emit(ctx, Chunk{Kind: ChunkToolCall, ToolCall: d})
				}
			}
		case "message_stop":
			stopped = true
		}
		if cerr != nil {
			return nil, r.failure(ctx, fullName, st, cerr)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, r.failure(ctx, fullName, st, err)
	}
	if !stopped {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("call %s: %w", fullName, ctx.Err())
		}
		return nil, &Error{Model: fullName, Status: st.snapshot().status, Retryable: true,
			Message: "the response stream ended before message_stop: the reply is incomplete"}
	}
	return fromAnthropic(&acc, fullName), nil
}

// anthropicParams builds the request: system messages become the system
// blocks, consecutive messages of one role one message (the API wants
// the results of parallel tool calls together), and a cache key puts
// cache_control breakpoints after the last tool and the first system
// block (Request.CacheKey).
func anthropicParams(ctx context.Context, modelName string, req Request, messages []agent.Message) (anthropic.MessageNewParams, error) {
	params := anthropic.MessageNewParams{Model: anthropic.Model(modelName), MaxTokens: int64(req.MaxTokens)}
	params.MaxTokens = agent.OrDefault(params.MaxTokens, defaultAnthropicMaxTokens)
	if budget := req.ReasoningBudget; budget > 0 {
		// Thinking needs max_tokens above its budget, and the default
		// temperature.
		if params.MaxTokens <= int64(budget) {
			params.MaxTokens = int64(budget) + defaultAnthropicMaxTokens
		}
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(budget))
	} else if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	for i, m := range messages {
		var blocks []anthropic.ContentBlockParamUnion
		role := anthropic.MessageParamRoleUser
		switch m.Role {
		case agent.RoleSystem:
			if strings.TrimSpace(m.Content) != "" {
				params.System = append(params.System, anthropic.TextBlockParam{Text: m.Content})
			}
			continue
		case agent.RoleUser:
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for j, part := range m.Parts {
				b, err := anthropicPart(ctx, req, part, fmt.Sprintf("message %d part %d", i, j))
				if err != nil {
					return params, err
				}
				blocks = append(blocks, b)
			}
		case agent.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
			var err error
			if blocks, err = anthropicAssistant(i, m); err != nil {
				return params, err
			}
		case agent.RoleTool:
			res, err := anthropicToolResult(ctx, req, i, m)
			if err != nil {
				return params, err
			}
			blocks = append(blocks, res)
		default:
			return params, agent.Errorf(agent.CodeInvalid, "message %d: unknown role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue // an empty turn says nothing, and the API refuses it
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			continue
		}
		params.Messages = append(params.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	tools, err := anthropicTools(req)
	if err != nil {
		return params, err
	}
	params.Tools = tools
	if req.CacheKey != "" {
		if n := len(params.Tools); n > 0 {
			params.Tools[n-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		if len(params.System) > 0 {
			params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
	}
	return params, nil
}

// anthropicAssistant is an assistant message's blocks, apart so that
// anthropicParams stays readable.
func anthropicAssistant(i int, m agent.Message) ([]anthropic.ContentBlockParamUnion, error) {
	var blocks []anthropic.ContentBlockParamUnion
	// A thinking block goes back only as the provider sealed it;
	// reasoning without a signature (another provider's, before a
	// fallback) is left out, as the API would refuse it.
	for _, th := range m.Reasoning {
		switch {
		case th.Redacted != "":
			blocks = append(blocks, anthropic.NewRedactedThinkingBlock(th.Redacted))
		case th.Signature != "":
			blocks = append(blocks, anthropic.NewThinkingBlock(th.Signature, th.Text))
		}
	}
	if strings.TrimSpace(m.Content) != "" {
		blocks = append(blocks, anthropic.NewTextBlock(m.Content))
	}
	for _, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Name == "" {
			return nil, agent.Errorf(agent.CodeInvalid, "message %d: tool call without id or name", i)
		}
		args := json.RawMessage(tc.Arguments)
		if strings.TrimSpace(tc.Arguments) == "" || !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, args, tc.Name))
	}
	return blocks, nil
}

// anthropicToolResult is a tool message's result block, its files the
// model can take included, apart so that anthropicParams stays readable.
func anthropicToolResult(ctx context.Context, req Request, i int, m agent.Message) (anthropic.ContentBlockParamUnion, error) {
	if m.ToolCallID == "" {
		return anthropic.ContentBlockParamUnion{}, agent.Errorf(agent.CodeInvalid, "message %d: tool result without tool_call_id", i)
	}
	res := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.Content != "" {
		res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: m.Content}})
	}
	for j, part := range m.Parts {
		b, err := anthropicPart(ctx, req, part, fmt.Sprintf("message %d part %d", i, j))
		if agent.IsCode(err, agent.CodeInvalid) && part.Type != agent.PartText {
			continue // a file the model cannot take (toolFileSkipped)
		}
		if err != nil {
			return anthropic.ContentBlockParamUnion{}, err
		}
		switch {
		case b.OfImage != nil:
			res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
		case b.OfDocument != nil:
			res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
		case b.OfText != nil:
			res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfText: b.OfText})
		}
	}
	if len(res.Content) == 0 {
		res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: "(no output)"}})
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &res}, nil
}

// anthropicTools is the request's tools, strict ones held to Anthropic's
// limit, apart so that anthropicParams stays readable.
func anthropicTools(req Request) ([]anthropic.ToolUnionParam, error) {
	var tools []anthropic.ToolUnionParam
	strict := 0
	for _, t := range req.specs() {
		// Strict as compiled (CompileTools keeps a request's strict
		// tools within Anthropic's limits; a tool added to compiled ones
		// is held to its limit on strict tools here).
		if t.Strict {
			if strict++; strict > strictschema.AnthropicMaxStrictTools {
				t.Strict = false
			}
		}
		tp, err := anthropicTool(t)
		if err != nil {
			return tools, err
		}
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return tools, nil
}

// anthropicTool converts a compiled tool, strict as compiled; its
// parameters' properties and required members have fields of their own
// in the SDK, the rest goes as it is.
func anthropicTool(t agent.CompiledTool) (anthropic.ToolParam, error) {
	if t.Name == "" {
		return anthropic.ToolParam{}, agent.Errorf(agent.CodeInvalid, "tool without a name")
	}
	schema, err := parametersOf(t)
	if err != nil {
		return anthropic.ToolParam{}, err
	}
	in := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			if err := json.Unmarshal(v, &in.Required); err != nil {
				return anthropic.ToolParam{}, agent.Errorf(agent.CodeInvalid, "tool %q: required must be a list of names", t.Name)
			}
		default:
			in.ExtraFields[k] = v
		}
	}
	if in.Properties == nil {
		in.Properties = json.RawMessage(`{}`)
	}
	tp := anthropic.ToolParam{Name: t.Name, InputSchema: in}
	if t.Description != "" {
		tp.Description = param.NewOpt(t.Description)
	}
	if t.Strict {
		tp.Strict = param.NewOpt(true)
	}
	return tp, nil
}

// anthropicPart is a user's or a tool's part as a content block: images
// and PDFs by their bytes, text documents as text.
func anthropicPart(ctx context.Context, req Request, p agent.Part, at string) (anthropic.ContentBlockParamUnion, error) {
	if p.Type == agent.PartText {
		return anthropic.NewTextBlock(p.Text), nil
	}
	data, mime, err := req.media(ctx, p, at)
	if err != nil {
		return anthropic.ContentBlockParamUnion{}, err
	}
	enc := base64.StdEncoding.EncodeToString(data)
	switch {
	case agent.IsImageType(mime):
		return anthropic.NewImageBlockBase64(mime, enc), nil
	case mime == "application/pdf":
		b := anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: enc})
		if p.Name != "" {
			b.OfDocument.Title = param.NewOpt(p.Name)
		}
		return b, nil
	case strings.HasPrefix(mime, "text/"):
		b := anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: string(data)})
		if p.Name != "" {
			b.OfDocument.Title = param.NewOpt(p.Name)
		}
		return b, nil
	}
	return anthropic.ContentBlockParamUnion{}, agent.Errorf(agent.CodeInvalid,
		"%s: anthropic models cannot take a %s %s; they take images (%s), PDFs and text files", at, mime, p.Type, strings.Join(agent.ImageTypes, ", "))
}

// fromAnthropic reads a reply: its text blocks joined, its thinking
// (signed, or redacted) kept with the message to be sent back, its tool
// calls, its usage.
func fromAnthropic(msg *anthropic.Message, fullName string) *Response {
	out := &Response{Message: agent.Message{Role: agent.RoleAssistant}, Model: fullName}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			// Each block is signed over its own text: they go back as
			// they came.
			out.Message.Reasoning = append(out.Message.Reasoning, agent.Reasoning{Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			out.Message.Reasoning = append(out.Message.Reasoning, agent.Reasoning{Redacted: b.Data})
		case "tool_use":
			args := string(b.Input)
			if strings.TrimSpace(args) == "" || args == "null" {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Message.Content = text.String()
	out.Reasoning = agent.ReasoningText(out.Message.Reasoning)
	u := msg.Usage
	out.Usage = agent.Usage{
		PromptTokens:     int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens),
		CompletionTokens: int(u.OutputTokens),
		CachedTokens:     int(u.CacheReadInputTokens),
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	out.FinishReason = normalizeFinish(string(msg.StopReason), len(out.Message.ToolCalls) > 0)
	return out
}
