package scripted

import (
	"encoding/json"
	"errors"
	"fmt"
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

	if err := recordAnthropicSystem(&rec, req.System); err != nil {
		return incoming{}, err
	}
	if present(req.Tools) {
		if err := recordAnthropicTools(&rec, req.Tools); err != nil {
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

// recordAnthropicSystem records the top-level system member, a string or
// text blocks, as rec.System, and counts its cache_control breakpoints.
func recordAnthropicSystem(rec *Request, raw json.RawMessage) error {
	system, _, err := decodeBlocks(raw)
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	var texts []string
	for i, b := range system {
		if b.Type != "text" {
			return fmt.Errorf("system.%d: type %q: system blocks must be text", i, b.Type)
		}
		texts = append(texts, b.Text)
		if present(b.CacheControl) {
			rec.CacheControl++
			rec.hints.system = true
		}
	}
	rec.System = strings.Join(texts, "\n")
	return nil
}

// recordAnthropicTools records the names of the offered tools, counts
// their cache_control breakpoints and takes the strict ones' schemas.
func recordAnthropicTools(rec *Request, raw json.RawMessage) error {
	var tools []struct {
		Name         string          `json:"name"`
		CacheControl json.RawMessage `json:"cache_control"`
		Strict       bool            `json:"strict"`
		InputSchema  json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return fmt.Errorf("tools: %w", err)
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
	return takeStrict(APIAnthropic, rec, strict)
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
