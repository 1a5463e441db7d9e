package llm

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// toMessages converts the conversation to langchaingo's form for an
// OpenAI-compatible server. A user message's parts follow its text; a
// tool's images, which the API does not take in a tool message, go in a
// user message after the tool results of that step. A tool's file the
// model cannot take is left out (toolFileSkipped).
func toMessages(ctx context.Context, req Request, msgs []agent.Message) ([]llms.MessageContent, error) {
	out := make([]llms.MessageContent, 0, len(msgs))
	var toolImages []llms.ContentPart // images of the tool results just read
	flush := func() {
		if len(toolImages) > 0 {
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: toolImages})
			toolImages = nil
		}
	}
	for i, m := range msgs {
		if m.Role != agent.RoleTool {
			flush()
		}
		switch m.Role {
		case agent.RoleSystem:
			out = append(out, llms.TextParts(llms.ChatMessageTypeSystem, m.Content))
		case agent.RoleUser:
			if len(m.Parts) == 0 {
				out = append(out, llms.TextParts(llms.ChatMessageTypeHuman, m.Content))
				continue
			}
			var parts []llms.ContentPart
			if m.Content != "" {
				parts = append(parts, llms.TextContent{Text: m.Content})
			}
			for j, p := range m.Parts {
				part, err := openAIPart(ctx, req, p, fmt.Sprintf("message %d part %d", i, j))
				if err != nil {
					return nil, err
				}
				parts = append(parts, part)
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: parts})
		case agent.RoleAssistant:
			var parts []llms.ContentPart
			if m.Content != "" {
				parts = append(parts, llms.TextContent{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, agent.Errorf(agent.CodeInvalid, "message %d: tool call without id or name", i)
				}
				args := tc.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				parts = append(parts, llms.ToolCall{ID: tc.ID, Type: "function",
					FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: args}})
			}
			if len(parts) == 0 {
				continue // an empty assistant turn says nothing, and some providers reject it
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
		case agent.RoleTool:
			if m.ToolCallID == "" {
				return nil, agent.Errorf(agent.CodeInvalid, "message %d: tool result without tool_call_id", i)
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: m.Name, Content: m.Content},
			}})
			for j, p := range m.Parts {
				part, err := openAIPart(ctx, req, p, fmt.Sprintf("message %d part %d", i, j))
				if agent.IsCode(err, agent.CodeInvalid) && p.Type != agent.PartText {
					continue // a file the model cannot take (toolFileSkipped)
				}
				if err != nil {
					return nil, err
				}
				if len(toolImages) == 0 {
					toolImages = append(toolImages, llms.TextContent{Text: "Images the tool calls above returned:"})
				}
				toolImages = append(toolImages, llms.TextContent{Text: fmt.Sprintf("From call %s:", m.ToolCallID)}, part)
			}
		default:
			return nil, agent.Errorf(agent.CodeInvalid, "message %d: unknown role %q", i, m.Role)
		}
	}
	flush()
	return out, nil
}

// openAIPart is a part as OpenAI's chat completions take it: text, or an
// image as a data: URL of its bytes.
func openAIPart(ctx context.Context, req Request, p agent.Part, at string) (llms.ContentPart, error) {
	if p.Type == agent.PartText {
		return llms.TextContent{Text: p.Text}, nil
	}
	if p.MIMEType != "" && !agent.IsImageType(p.MIMEType) {
		// Known before its bytes are read.
		return nil, agent.Errorf(agent.CodeInvalid, "%s: a %s %s cannot be sent to an OpenAI-compatible model; it takes images (%s)",
			at, p.MIMEType, p.Type, strings.Join(agent.ImageTypes, ", "))
	}
	data, mime, err := req.media(ctx, p, at)
	if err != nil {
		return nil, err
	}
	if !agent.IsImageType(mime) {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: a %s %s cannot be sent to an OpenAI-compatible model; it takes images (%s)",
			at, mime, p.Type, strings.Join(agent.ImageTypes, ", "))
	}
	return llms.ImageURLContent{URL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)}, nil
}

// MaxMediaBytes bounds an image or a file sent to a model.
const MaxMediaBytes = 20 << 20

// media reads the bytes behind a part's cas:// ref.
func (req Request) media(ctx context.Context, p agent.Part, at string) ([]byte, string, error) {
	if !strings.HasPrefix(p.URL, agent.CASRefPrefix) {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: %s parts reach a model by cas:// ref, not %q", at, p.Type, words.Clip(p.URL, 80))
	}
	if req.Media == nil {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: this call cannot read %s parts", at, p.Type)
	}
	data, mime, err := req.Media(ctx, p.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: read %s: %w", at, p.URL, err)
	}
	if p.MIMEType != "" {
		mime = p.MIMEType
	}
	if len(data) > MaxMediaBytes {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: %s is %d bytes; a model is sent at most %d", at, p.URL, len(data), MaxMediaBytes)
	}
	if p.Type == agent.PartImage && !agent.IsImageType(mime) {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: %s is %s, not an image type models take (%s)", at, p.URL, mime, strings.Join(agent.ImageTypes, ", "))
	}
	return data, mime, nil
}

// toolFileSkipped: a tool's result may carry files the model cannot take
// — a type its provider does not read (any file but an image for an
// OpenAI-compatible model), one over MaxMediaBytes (a download of any
// size) — and they are left out of what the model is sent rather than
// failing the call: the tool's text names each by its ref (the runtime
// notes every file a call produced), so the model knows of them and can
// pass them on, and the turn's result still carries them as blocks.
// What a user sends is another matter: a part the model cannot take
// fails the call (checkParts), so that the caller learns it was not
// read.

// checkParts refuses, before anything is sent, the parts of the
// conversation's messages (tools' aside: toolFileSkipped) a provider
// cannot take at all: files, except for Anthropic's models (PDFs and text
// documents).
func checkParts(provider string, req Request) error {
	if provider == agent.ProviderAnthropic {
		return nil
	}
	for i, m := range req.Messages {
		if m.Role == agent.RoleTool {
			continue
		}
		for j, p := range m.Parts {
			if p.Type == agent.PartFile {
				return agent.Errorf(agent.CodeInvalid, "message %d part %d: provider %s cannot take file parts (%s); use an anthropic model, or send the file's text",
					i, j, provider, words.Clip(p.Name, 80))
			}
		}
	}
	return nil
}

// toTools is the OpenAI API's function tools: each with strict: true when
// it was compiled strict (CompileTools), so that the provider holds the
// model's arguments to its schema; a tool that could not be made strict
// goes without, and the tool refuses arguments it cannot take as the
// call's error, which the model reads and corrects.
func toTools(tools []agent.CompiledTool) ([]llms.Tool, error) {
	out := make([]llms.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Name == "" {
			return nil, agent.Errorf(agent.CodeInvalid, "tool without a name")
		}
		if _, err := parametersOf(t); err != nil {
			return nil, err
		}
		out = append(out, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
		}})
	}
	return out, nil
}

// toResponse merges the choices of a langchaingo response into one
// assistant message. OpenAI answers with one choice holding text and tool
// calls; Anthropic with one choice per content block.
func toResponse(resp *llms.ContentResponse) (*Response, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return nil, fmt.Errorf("the provider returned no choices")
	}
	out := &Response{Message: agent.Message{Role: agent.RoleAssistant}}
	var text, reasoning strings.Builder
	usageSeen := false
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		text.WriteString(c.Content)
		reasoning.WriteString(reasoningOf(c))
		for _, tc := range c.ToolCalls {
			if tc.FunctionCall == nil {
				continue
			}
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", len(out.Message.ToolCalls))
			}
			args := tc.FunctionCall.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, agent.ToolCall{ID: id, Name: tc.FunctionCall.Name, Arguments: args})
		}
		out.FinishReason = cmp.Or(out.FinishReason, c.StopReason)
		if !usageSeen {
			if u, ok := usageOf(c.GenerationInfo); ok {
				out.Usage, usageSeen = u, true
			}
		}
	}
	out.Message.Content, out.Reasoning = text.String(), reasoning.String()
	out.FinishReason = normalizeFinish(out.FinishReason, len(out.Message.ToolCalls) > 0)
	return out, nil
}

// reasoningOf is a choice's reasoning: the openai client's
// ReasoningContent (reasoning_content), or the text of an anthropic
// thinking block, a choice of its own whose GenerationInfo has the
// block's ThinkingSignature. (The anthropic client also fills
// ThinkingContent of text blocks from <thinking> tags it finds in the
// text, which stays the answer's.)
func reasoningOf(c *llms.ContentChoice) string {
	if c.ReasoningContent != "" {
		return c.ReasoningContent
	}
	if _, thinking := c.GenerationInfo["ThinkingSignature"]; thinking {
		s, _ := c.GenerationInfo["ThinkingContent"].(string)
		return s
	}
	return ""
}

// usageOf reads token counts from GenerationInfo, in OpenAI's names or
// Anthropic's: langchaingo's OpenAI client sets PromptCachedTokens and
// CompletionReasoningTokens (from prompt_tokens_details and
// completion_tokens_details), its Anthropic client CacheReadInputTokens.
func usageOf(info map[string]any) (agent.Usage, bool) {
	if info == nil {
		return agent.Usage{}, false
	}
	var u agent.Usage
	var ok1, ok2 bool
	if u.PromptTokens, ok1 = intOf(info["PromptTokens"]); ok1 {
		u.CompletionTokens, ok2 = intOf(info["CompletionTokens"])
		u.TotalTokens, _ = intOf(info["TotalTokens"])
		u.CachedTokens, _ = intOf(info["PromptCachedTokens"])
		u.ReasoningTokens, _ = intOf(info["CompletionReasoningTokens"])
	} else if u.PromptTokens, ok1 = intOf(info["InputTokens"]); ok1 {
		u.CompletionTokens, ok2 = intOf(info["OutputTokens"])
		// Anthropic's input_tokens leaves out what was read from or
		// written to the cache; the prompt is all three.
		created, _ := intOf(info["CacheCreationInputTokens"])
		u.CachedTokens, _ = intOf(info["CacheReadInputTokens"])
		u.PromptTokens += created + u.CachedTokens
	}
	if !ok1 && !ok2 {
		return agent.Usage{}, false
	}
	u.TotalTokens = cmp.Or(u.TotalTokens, u.PromptTokens+u.CompletionTokens)
	return u, true
}

func intOf(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}

// normalizeFinish maps provider finish reasons to OpenAI's vocabulary.
func normalizeFinish(reason string, hasToolCalls bool) string {
	switch reason {
	case "end_turn", "stop_sequence":
		reason = agent.FinishStop
	case "tool_use":
		reason = agent.FinishToolCalls
	case "max_tokens":
		reason = agent.FinishLength
	case "<nil>":
		reason = ""
	}
	if reason == "" {
		if hasToolCalls {
			return agent.FinishToolCalls
		}
		return agent.FinishStop
	}
	return reason
}
