package scripted

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The OpenAI chat-completions wire format, as far as clients use it.

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Tools is kept as sent (Request.ToolsJSON); decoded for the names.
	Tools               json.RawMessage `json:"tools"`
	Temperature         *float64        `json:"temperature"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	// ResponseFormat is kept as sent: {"type": "json_schema",
	// "json_schema": {"name", "schema", "strict"}}, {"type":
	// "json_object"} or {"type": "text"}.
	ResponseFormat json.RawMessage `json:"response_format"`
	PromptCacheKey string          `json:"prompt_cache_key"`
	// User is the end user's id; OpenAI routes a request without a
	// prompt_cache_key to a cache by it.
	User string `json:"user"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// text returns the message content: a string, or the text parts of a
// content array.
func (m wireMessage) text() string {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// openAIPart is one part of a content array.
type openAIPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// ImageURL is {"url": ..., "detail": ...}, or a bare URL string as
	// some clients send it.
	ImageURL json.RawMessage `json:"image_url"`
	File     *struct {
		FileData string `json:"file_data"` // a data: URL
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// parts returns the parts of a content array; nil for a string. Errors
// start with the part at fault ("[1].image_url…").
func (m wireMessage) parts() ([]Part, error) {
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return nil, nil
	}
	var raw []openAIPart
	if err := json.Unmarshal(m.Content, &raw); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	parts := make([]Part, 0, len(raw))
	for i, p := range raw {
		part := Part{Type: p.Type, Text: p.Text}
		switch p.Type {
		case "text", "input_audio", "refusal":
		case "image_url":
			part.Type = "image"
			var ref struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(p.ImageURL, &ref.URL) != nil {
				if err := json.Unmarshal(p.ImageURL, &ref); err != nil {
					return nil, fmt.Errorf("[%d].image_url: %w", i, err)
				}
			}
			if ref.URL == "" {
				return nil, fmt.Errorf("[%d].image_url.url is required", i)
			}
			if err := part.setURL(ref.URL); err != nil {
				return nil, fmt.Errorf("[%d].image_url.url: %w", i, err)
			}
		case "file":
			if p.File == nil {
				return nil, fmt.Errorf("[%d].file is required", i)
			}
			part.FileID, part.Name = p.File.FileID, p.File.Filename
			if p.File.FileData != "" {
				if err := part.setURL(p.File.FileData); err != nil {
					return nil, fmt.Errorf("[%d].file.file_data: %w", i, err)
				}
			}
		default:
			// As OpenAI refuses it: a client's own part type (langchaingo's
			// "binary") would fail there too.
			return nil, fmt.Errorf("[%d].type: invalid value %q: supported are text, image_url, input_audio, file and refusal", i, p.Type)
		}
		parts = append(parts, part)
	}
	return parts, nil
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"` // streamed deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens            int                `json:"prompt_tokens"`
	CompletionTokens        int                `json:"completion_tokens"`
	TotalTokens             int                `json:"total_tokens"`
	PromptTokensDetails     *promptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	Usage             wireUsage          `json:"usage"`
	SystemFingerprint string             `json:"system_fingerprint"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
	Logprobs     *struct{}         `json:"logprobs"`
}

type completionMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	Reasoning        *string        `json:"reasoning,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is only on the extra last chunk sent when the client asked for
	// stream_options.include_usage.
	Usage *wireUsage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// Reasoning deltas, under the script's ReasoningField.
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	Reasoning        *string        `json:"reasoning,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func newErrorBody(status int, msg string) errorBody {
	var b errorBody
	b.Error.Message = msg
	var code string
	switch {
	case status == 401:
		b.Error.Type, code = "invalid_request_error", "invalid_api_key"
	case status == 403:
		b.Error.Type = "permission_error"
	case status == 404:
		b.Error.Type, code = "invalid_request_error", "not_found"
	case status == 429:
		b.Error.Type, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		b.Error.Type = "server_error"
	default:
		b.Error.Type = "invalid_request_error"
	}
	if code != "" {
		b.Error.Code = &code
	}
	return b
}
