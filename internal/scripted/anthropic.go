package scripted

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic's Messages API (POST /v1/messages), as far as clients use it:
// the request is mapped onto the same Request and conversation as an
// OpenAI one, and the reply is a Message or its event stream.

type anthropicRequest struct {
	Model string `json:"model"`
	// MaxTokens is required by the API; a pointer tells absent from 0.
	MaxTokens    *int               `json:"max_tokens"`
	Messages     []anthropicMessage `json:"messages"`
	System       json.RawMessage    `json:"system"` // a string or text blocks
	Stream       bool               `json:"stream"`
	Temperature  *float64           `json:"temperature"`
	Tools        json.RawMessage    `json:"tools"`
	Thinking     json.RawMessage    `json:"thinking"`
	CacheControl json.RawMessage    `json:"cache_control"`
	OutputConfig *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or content blocks
}

// anthropicBlock is a request content block of any type; each type uses
// some of the members.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"` // text
	// Source of an image or document.
	Source *anthropicSource `json:"source"`
	Title  string           `json:"title"` // document
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result: Content is a string or text, image and document blocks.
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// thinking
	Thinking  *string `json:"thinking"`
	Signature *string `json:"signature"`
	// redacted_thinking
	Data string `json:"data"`

	CacheControl json.RawMessage `json:"cache_control"`
}

type anthropicSource struct {
	Type      string          `json:"type"` // base64, url, file, text (document), content (document)
	MediaType string          `json:"media_type"`
	Data      string          `json:"data"`
	URL       string          `json:"url"`
	FileID    string          `json:"file_id"`
	Content   json.RawMessage `json:"content"` // a string or text blocks
}

// present reports whether an optional member was sent with a value.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// decodeBlocks decodes content that is a string (one text block) or an
// array of blocks; isString reports the former.
func decodeBlocks(raw json.RawMessage) (blocks []anthropicBlock, isString bool, err error) {
	if !present(raw) {
		return nil, false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, true, nil
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false, err
	}
	return blocks, false, nil
}

// decodeAnthropic decodes, checks and records a Messages request.
func decodeAnthropic(body []byte) (incoming, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return incoming{}, fmt.Errorf("invalid request body: %w", err)
	}
	if req.MaxTokens == nil {
		return incoming{}, errors.New("max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return incoming{}, fmt.Errorf("max_tokens: %d is not a positive number of tokens", *req.MaxTokens)
	}
	if len(req.Messages) == 0 {
		return incoming{}, errors.New("messages: at least one message is required")
	}
	rec := Request{
		Model:       req.Model,
		Stream:      req.Stream,
		Temperature: req.Temperature,
		MaxTokens:   *req.MaxTokens,
		ToolsJSON:   string(req.Tools),
	}
	if present(req.CacheControl) {
		rec.CacheControl++
		rec.hints.auto = true
	}
	if present(req.Thinking) {
		rec.Thinking = req.Thinking
	}
	if req.OutputConfig != nil && present(req.OutputConfig.Format) {
		rec.ResponseFormat = req.OutputConfig.Format
	}

	system, _, err := decodeBlocks(req.System)
	if err != nil {
		return incoming{}, fmt.Errorf("system: %w", err)
	}
	var texts []string
	for i, b := range system {
		if b.Type != "text" {
			return incoming{}, fmt.Errorf("system.%d: type %q: system blocks must be text", i, b.Type)
		}
		texts = append(texts, b.Text)
		if present(b.CacheControl) {
			rec.CacheControl++
			rec.hints.system = true
		}
	}
	rec.System = strings.Join(texts, "\n")

	if present(req.Tools) {
		var tools []struct {
			Name         string          `json:"name"`
			CacheControl json.RawMessage `json:"cache_control"`
			Strict       bool            `json:"strict"`
			InputSchema  json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return incoming{}, fmt.Errorf("tools: %w", err)
		}
		strict := make([]strictTool, 0, len(tools))
		for _, t := range tools {
			rec.Tools = append(rec.Tools, t.Name)
			if present(t.CacheControl) {
				rec.CacheControl++
				rec.hints.tools = true
			}
			strict = append(strict, strictTool{name: t.Name, strict: t.Strict, schema: t.InputSchema})
		}
		if err := takeStrict(APIAnthropic, &rec, strict); err != nil {
			return incoming{}, err
		}
	}

	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return incoming{}, fmt.Errorf("messages.%d.role: %q: want user or assistant (the system prompt is the top-level system member)", i, m.Role)
		}
		msgs, breakpoints, err := recordAnthropicMessage(m)
		if err != nil {
			return incoming{}, fmt.Errorf("messages.%d.%w", i, err)
		}
		rec.Messages = append(rec.Messages, msgs...)
		rec.CacheControl += breakpoints
	}
	return incoming{rec: rec}, nil
}

// recordAnthropicMessage records one message: an assistant message as
// one Message, a user message as a "tool" message per tool_result block
// and a "user" message per run of other blocks. It returns the number of
// cache_control breakpoints in the message.
func recordAnthropicMessage(m anthropicMessage) ([]Message, int, error) {
	blocks, isString, err := decodeBlocks(m.Content)
	if err != nil {
		return nil, 0, fmt.Errorf("content: %w", err)
	}
	if isString {
		return []Message{{Role: m.Role, Content: blocks[0].Text}}, 0, nil
	}
	var (
		out         []Message
		cur         *Message // the message blocks go to
		breakpoints int
	)
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for j, b := range blocks {
		marked := present(b.CacheControl)
		if marked {
			breakpoints++
		}
		if cur == nil && b.Type != "tool_result" {
			cur = &Message{Role: m.Role}
		}
		if marked && cur != nil && b.Type != "tool_result" {
			cur.CacheControl = true
		}
		switch b.Type {
		case "tool_result":
			flush()
			tool, n, err := recordToolResult(b)
			if err != nil {
				return nil, 0, fmt.Errorf("content.%d.%w", j, err)
			}
			breakpoints += n
			tool.CacheControl = marked || n > 0
			out = append(out, tool)
		case "tool_use":
			input := string(b.Input)
			if !present(b.Input) {
				input = "{}"
			}
			cur.ToolCalls = append(cur.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: input})
		case "thinking":
			if b.Signature == nil || *b.Signature == "" {
				return nil, 0, fmt.Errorf("content.%d.signature: thinking block signature required", j)
			}
			if b.Thinking != nil {
				cur.Reasoning += *b.Thinking
			}
			cur.Signature = *b.Signature
		default:
			p, err := blockPart(b)
			if err != nil {
				return nil, 0, fmt.Errorf("content.%d.%w", j, err)
			}
			cur.Parts = append(cur.Parts, p)
			cur.Content += p.textOf()
		}
	}
	flush()
	return out, breakpoints, nil
}

// textOf is the text a part adds to its message's Content.
func (p Part) textOf() string {
	if p.Type == "text" {
		return p.Text
	}
	return ""
}

// recordToolResult records a tool_result block as a "tool" message; its
// content blocks (text, images, documents) become Parts.
func recordToolResult(b anthropicBlock) (Message, int, error) {
	msg := Message{Role: "tool", ToolCallID: b.ToolUseID, IsError: b.IsError}
	blocks, isString, err := decodeBlocks(b.Content)
	if err != nil {
		return Message{}, 0, fmt.Errorf("content: %w", err)
	}
	if isString {
		msg.Content = blocks[0].Text
		return msg, 0, nil
	}
	breakpoints := 0
	for k, c := range blocks {
		if present(c.CacheControl) {
			breakpoints++
		}
		p, err := blockPart(c)
		if err != nil {
			return Message{}, 0, fmt.Errorf("content.%d.%w", k, err)
		}
		msg.Parts = append(msg.Parts, p)
		msg.Content += p.textOf()
	}
	return msg, breakpoints, nil
}

// blockPart records a text, image or document block (others by their
// type only). Errors start with the member at fault.
func blockPart(b anthropicBlock) (Part, error) {
	switch b.Type {
	case "text":
		return Part{Type: "text", Text: b.Text}, nil
	case "image", "document":
		p := Part{Type: "image"}
		if b.Type == "document" {
			p.Type, p.Name = "file", b.Title
		}
		src := b.Source
		if src == nil {
			return Part{}, errors.New("source: Field required")
		}
		switch src.Type {
		case "base64":
			if err := p.setBase64(src.Data, src.MediaType); err != nil {
				return Part{}, fmt.Errorf("source.data: %w", err)
			}
		case "url":
			if src.URL == "" {
				return Part{}, errors.New("source.url: Field required")
			}
			p.URL = src.URL
		case "file":
			p.FileID = src.FileID
		case "text":
			p.Text = src.Data
			p.setBytes([]byte(src.Data), src.MediaType)
		case "content":
			blocks, _, err := decodeBlocks(src.Content)
			if err != nil {
				return Part{}, fmt.Errorf("source.content: %w", err)
			}
			for _, c := range blocks {
				if c.Type == "text" {
					p.Text += c.Text
				}
			}
		default:
			return Part{}, fmt.Errorf("source.type: %q is not a source type", src.Type)
		}
		return p, nil
	case "":
		return Part{}, errors.New("type: Field required")
	default:
		return Part{Type: b.Type}, nil
	}
}

// Signature returns the signature the server gives a thinking block with
// this text: "sig-" and the hex SHA-256 of the text, so that a test can
// tell the signature it got back belongs to the thinking it was sent
// with.
func Signature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return "sig-" + hex.EncodeToString(sum[:])
}

// anthropicStop maps a reply's finish reason onto Anthropic's stop_reason:
// OpenAI's names are translated, others (end_turn, max_tokens,
// pause_turn, refusal, …) are sent as the script gives them.
func anthropicStop(rep reply) string {
	switch rep.finish {
	case "":
		if len(rep.toolCalls) > 0 {
			return "tool_use"
		}
		return "end_turn"
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default:
		return rep.finish
	}
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usageOf reports a reply's usage as Anthropic does: input_tokens are the
// prompt tokens neither read from nor written to the cache.
func usageOf(rep reply) anthropicUsage {
	cached := 0
	if d := rep.usage.PromptTokensDetails; d != nil {
		cached = d.CachedTokens
	}
	return anthropicUsage{
		InputTokens:              max(rep.usage.PromptTokens-cached-rep.cacheWrite, 0),
		OutputTokens:             rep.usage.CompletionTokens,
		CacheCreationInputTokens: rep.cacheWrite,
		CacheReadInputTokens:     cached,
	}
}

type anthropicReplyMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicReply `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicReply is a content block of a reply.
type anthropicReply struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// anthropicContent is the reply's content blocks: thinking, text, then
// tool_use. A tool call's arguments must be a JSON object, its input.
func anthropicContent(rep reply) ([]anthropicReply, error) {
	var blocks []anthropicReply
	if rep.reasoning != "" {
		thinking, sig := rep.reasoning, Signature(rep.reasoning)
		blocks = append(blocks, anthropicReply{Type: "thinking", Thinking: &thinking, Signature: &sig})
	}
	if rep.text != "" || len(rep.toolCalls) == 0 {
		text := rep.text
		blocks = append(blocks, anthropicReply{Type: "text", Text: &text})
	}
	for i, tc := range rep.toolCalls {
		input := strings.TrimSpace(tc.Function.Arguments)
		if input == "" {
			input = "{}"
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(input), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("tool_calls[%d] (%s): arguments %q are not a JSON object, as Anthropic's tool_use input must be",
				i, tc.Function.Name, truncate(input, 100))
		}
		blocks = append(blocks, anthropicReply{Type: "tool_use", ID: "toolu_" + strings.TrimPrefix(tc.ID, "call_"),
			Name: tc.Function.Name, Input: json.RawMessage(input)})
	}
	return blocks, nil
}

func (s *Server) anthropicReply(w http.ResponseWriter, r *http.Request, rule *compiledRule, rec Request, rep reply, cut int) {
	blocks, err := anthropicContent(rep)
	if err != nil {
		writeAnthropicError(w, http.StatusInternalServerError, fmt.Sprintf("rule %q: %v", rule.name, err), 0)
		return
	}
	id := "msg_" + strings.TrimPrefix(rep.id, "chatcmpl-")
	stop := anthropicStop(rep)
	if !rec.Stream {
		s.writeBody(w, anthropicReplyMessage{ID: id, Type: "message", Role: "assistant", Model: rep.model,
			Content: blocks, StopReason: &stop, Usage: usageOf(rep)}, cut, APIAnthropic)
		return
	}
	s.send(w, r, s.anthropicEvents(id, rep, blocks, stop), cut, "")
}

// anthropicEvents is the event stream of a reply, as the API sends it:
// message_start, ping, then per content block a content_block_start, its
// deltas (thinking_delta words and a signature_delta; text_delta words;
// input_json_delta fragments of a few bytes) and a content_block_stop,
// then message_delta with the stop reason and usage, and message_stop.
func (s *Server) anthropicEvents(id string, rep reply, blocks []anthropicReply, stop string) []event {
	usage := usageOf(rep)
	start := usage
	start.OutputTokens = 1 // as the API reports it before the first token
	events := []event{
		{name: "message_start", data: map[string]any{"type": "message_start", "message": anthropicReplyMessage{
			ID: id, Type: "message", Role: "assistant", Model: rep.model, Content: []anthropicReply{}, Usage: start}}},
		{name: "ping", data: map[string]string{"type": "ping"}},
	}
	delta := func(i int, d map[string]any, text string) event {
		return event{name: "content_block_delta", data: map[string]any{"type": "content_block_delta", "index": i, "delta": d},
			text: text, paced: true}
	}
	for i, b := range blocks {
		head := b
		var deltas []event
		switch b.Type {
		case "thinking":
			empty := ""
			head.Thinking, head.Signature = &empty, &empty
			for _, piece := range splitWords(*b.Thinking, s.pacing.ChunkWords) {
				deltas = append(deltas, delta(i, map[string]any{"type": "thinking_delta", "thinking": piece}, ""))
			}
			deltas = append(deltas, delta(i, map[string]any{"type": "signature_delta", "signature": *b.Signature}, ""))
		case "text":
			empty := ""
			head.Text = &empty
			for _, piece := range splitWords(*b.Text, s.pacing.ChunkWords) {
				deltas = append(deltas, delta(i, map[string]any{"type": "text_delta", "text": piece}, piece))
			}
		case "tool_use":
			head.Input = json.RawMessage("{}")
			for _, frag := range splitBytes(string(b.Input), argFragmentBytes) {
				deltas = append(deltas, delta(i, map[string]any{"type": "input_json_delta", "partial_json": frag}, ""))
			}
		}
		events = append(events, event{name: "content_block_start",
			data: map[string]any{"type": "content_block_start", "index": i, "content_block": head}})
		events = append(events, deltas...)
		events = append(events, event{name: "content_block_stop", data: map[string]any{"type": "content_block_stop", "index": i}})
	}
	return append(events,
		event{name: "message_delta", data: map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage}},
		event{name: "message_stop", data: map[string]string{"type": "message_stop"}},
	)
}

// anthropicErrorType is the error type Anthropic gives a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id,omitempty"`
}

func writeAnthropicError(w http.ResponseWriter, status int, msg string, retryAfterSec int) {
	if retryAfterSec > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSec))
	}
	b := anthropicError{Type: "error", RequestID: w.Header().Get("Request-Id")}
	b.Error.Type, b.Error.Message = anthropicErrorType(status), msg
	writeJSON(w, status, b)
}
