package scripted

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Request is a chat request as the server saw and answered it.
type Request struct {
	Rule   string // the matching rule; "" when none matched
	API    string // APIOpenAI or APIAnthropic: the route the request came by
	Model  string
	Stream bool
	// System is the system prompt as rules see it: OpenAI's system and
	// developer messages (which stay in Messages too) or Anthropic's
	// top-level system member, joined by "\n".
	System   string
	Messages []Message
	Tools    []string // names of the offered tools
	// StrictTools names the tools sent with strict: true, each with a
	// schema the API's strict mode takes (strict.go).
	StrictTools []string
	// ToolsJSON is the request's "tools" member as it was sent, byte for
	// byte, so that a test can tell whether two requests share a prefix.
	ToolsJSON string
	// PromptCacheKey is OpenAI's prompt_cache_key, "" when not sent.
	PromptCacheKey string
	Temperature    *float64 // nil when the client did not send one
	MaxTokens      int      // max_completion_tokens, else max_tokens
	// ResponseFormat is the request's structured-output format as the
	// client sent it: OpenAI's response_format, Anthropic's
	// output_config.format; nil when it sent none.
	ResponseFormat json.RawMessage
	// Thinking is Anthropic's thinking member as sent ({"type":
	// "enabled", "budget_tokens": 1024}, {"type": "adaptive"}, …); nil
	// when absent.
	Thinking json.RawMessage
	// CacheControl counts the cache_control breakpoints of an Anthropic
	// request: on the request itself, its system blocks, tools, message
	// content blocks and the blocks inside tool results.
	CacheControl int
	// Bytes is the size of the request's body.
	Bytes int
	// PromptTokens and CachedTokens are the prompt's tokens and the part
	// of them read from the prompt cache, as the cache counted them (see
	// Script.PromptCache); 0 without one.
	PromptTokens, CachedTokens int
	Status                     int       // HTTP status answered (200 for a cut stream)
	Faulted                    bool      // a fault of the rule was served instead of its reply
	At                         time.Time // when the request arrived

	hints cacheHints
	// strictSchemas are the strict tools' schemas, by name.
	strictSchemas map[string]json.RawMessage
}

// Message is one message of a recorded request. An Anthropic user message
// is recorded as one "tool" message per tool_result block (in order) and
// one "user" message for the blocks between them, as OpenAI would have
// them, so that rules and tests see both APIs alike.
type Message struct {
	Role       string // "system", "developer", "user", "assistant" or "tool"
	Content    string // the text: a string, or the text parts joined
	ToolCalls  []ToolCall
	ToolCallID string // of a tool result
	// IsError marks an Anthropic tool_result sent with is_error.
	IsError bool
	// Parts are the parts of content sent as an array (text, images,
	// files), in order; nil when the content was a plain string.
	Parts []Part
	// Reasoning and Signature are the thinking block(s) of an Anthropic
	// assistant message sent back: their text (joined) and the signature
	// of the last one.
	Reasoning string
	Signature string
	// CacheControl marks an Anthropic message with a cache_control
	// breakpoint on one of its blocks: the prompt up to its end may be
	// cached.
	CacheControl bool
}

// Part is one part of a message's content as it arrived.
type Part struct {
	// Type is "text", "image", "file" (OpenAI's file parts and Anthropic's
	// document blocks) or, for other parts, the type as sent.
	Type string
	Text string // of a text part, or of a plain-text document
	// MIMEType is the media type sent with data (or in a data: URL).
	MIMEType string
	URL      string // when sent by URL (not a data: URL)
	FileID   string // when sent by file id
	Name     string // a file's filename, a document's title
	// DataLen and DataSHA256 (hex) describe the bytes sent inline, base64
	// or in a data: URL, after decoding.
	DataLen    int
	DataSHA256 string
}

// ToolCall is a tool call of a recorded assistant message.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON: OpenAI's arguments string, Anthropic's input object
}

// maxBody bounds a request body; conversations in tests are far smaller.
const maxBody = 32 << 20

// incoming is a decoded request of either API.
type incoming struct {
	rec          Request
	includeUsage bool // OpenAI's stream_options.include_usage
}

// decodeOpenAI decodes and records a chat-completions request.
func decodeOpenAI(body []byte) (incoming, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return incoming{}, fmt.Errorf("invalid request body: %w", err)
	}
	if len(req.Messages) == 0 {
		return incoming{}, errors.New("messages must not be empty")
	}
	rec := Request{
		Model:          req.Model,
		Stream:         req.Stream,
		Temperature:    req.Temperature,
		MaxTokens:      req.MaxCompletionTokens,
		PromptCacheKey: req.PromptCacheKey,
		hints:          cacheHints{key: req.PromptCacheKey},
	}
	rec.hints.key = cmp.Or(rec.hints.key, req.User)
	if f := req.ResponseFormat; len(f) > 0 && string(f) != "null" {
		rec.ResponseFormat = f
	}
	rec.MaxTokens = cmp.Or(rec.MaxTokens, req.MaxTokens)
	rec.ToolsJSON = string(req.Tools)
	if len(req.Tools) > 0 {
		var tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Strict     bool            `json:"strict"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return incoming{}, fmt.Errorf("invalid request body: tools: %w", err)
		}
		strict := make([]strictTool, 0, len(tools))
		for _, t := range tools {
			rec.Tools = append(rec.Tools, t.Function.Name)
			strict = append(strict, strictTool{name: t.Function.Name, strict: t.Function.Strict, schema: t.Function.Parameters})
		}
		if err := takeStrict(APIOpenAI, &rec, strict); err != nil {
			return incoming{}, err
		}
	}
	var system []string
	for i, m := range req.Messages {
		parts, err := m.parts()
		if err != nil {
			return incoming{}, fmt.Errorf("messages[%d].content%w", i, err)
		}
		msg := Message{Role: m.Role, Content: m.text(), ToolCallID: m.ToolCallID, Parts: parts}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, msg.Content)
		}
		rec.Messages = append(rec.Messages, msg)
	}
	rec.System = strings.Join(system, "\n")
	return incoming{rec: rec, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}, nil
}

func toConversation(rec Request) conversation {
	conv := conversation{model: rec.Model, system: rec.System}
	for _, m := range rec.Messages {
		if m.Role == "user" {
			conv.lastUser, conv.hasUser, conv.userImage = m.Content, true, hasImage(m.Parts)
		}
	}
	if n := len(rec.Messages); n > 0 {
		last := rec.Messages[n-1]
		conv.lastRole, conv.last = last.Role, last.Content
	}
	return conv
}

func hasImage(parts []Part) bool {
	return slices.ContainsFunc(parts, func(p Part) bool { return p.Type == "image" })
}
