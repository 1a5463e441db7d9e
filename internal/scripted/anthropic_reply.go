package scripted

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The reply side of Anthropic's Messages API: a reply rendered as a
// Message or its event stream, and errors in the API's shape
// (anthropic.go decodes the request).

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
		input := cmp.Or(strings.TrimSpace(tc.Function.Arguments), "{}")
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
