package scripted

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

const anthropicScript = `
pacing: {chunk_words: 1}
rules:
  - name: describe
    when: {user: '(?i)describe', has_image: true}
    reply: {text: 'A red square.'}
  - name: describe-blind
    when: {user: '(?i)describe', has_image: false}
    reply: {text: 'I see no image.'}
  - name: calculate
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '(.+)'}
    reply: {text: 'The result is $1.'}
  - name: think
    when: {user: 'why'}
    reply: {reasoning: 'The user asks why. A short answer will do.', text: 'Because.'}
  - name: counted
    when: {user: 'count'}
    reply: {text: 'one two three', usage: {prompt_tokens: 20, completion_tokens: 3, cached_tokens: 12, cache_write_tokens: 5}}
  - name: truncated
    when: {user: 'ramble'}
    reply: {text: 'and so on', finish_reason: length}
  - name: pirate
    when: {system: 'pirate', user: '.'}
    reply: {text: 'Arr.'}
  - name: slow
    when: {user: 'slow'}
    fault: {status: 429, retry_after_sec: 7, headers: {anthropic-ratelimit-requests-remaining: "0"}}
    reply: {text: 'ok'}
  - name: overloaded
    when: {user: 'overloaded'}
    fault: {status: 529, times: -1}
  - name: cut
    when: {user: 'cut'}
    fault: {cut_after_chunks: 4, times: -1}
    reply: {text: 'a long answer that will be cut short'}
  - name: hello
    when: {user: 'hello'}
    reply: {text: 'Hello there, friend.'}
`

func anthropicClient(srv *Server) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(srv.RootURL()), option.WithAPIKey("test-key"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{}))
}

func userParams(blocks ...anthropic.ContentBlockParamUnion) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-scripted", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)}}
}

// ask sends params through the SDK, streamed (the message accumulated from
// the events) or not.
func ask(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams, stream bool) (*anthropic.Message, error) {
	t.Helper()
	if !stream {
		return c.Messages.New(t.Context(), params)
	}
	s := c.Messages.NewStreaming(t.Context(), params)
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &msg, nil
}

func calculatorTool() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"expression": map[string]any{"type": "string"}}}, "calculator")}
}

// TestAnthropicThroughSDK: the official SDK reads the server's Messages,
// plain and streamed, as it reads Anthropic's.
func TestAnthropicThroughSDK(t *testing.T) {
	srv := start(t, anthropicScript)
	c := anthropicClient(srv)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			tests := []struct {
				name  string
				ask   string
				check func(t *testing.T, m *anthropic.Message)
			}{
				{"text", "hello", func(t *testing.T, m *anthropic.Message) {
					require.Len(t, m.Content, 1)
					require.Equal(t, "text", m.Content[0].Type)
					require.Equal(t, "Hello there, friend.", m.Content[0].Text)
					require.Equal(t, anthropic.StopReasonEndTurn, m.StopReason)
					require.Equal(t, "assistant", string(m.Role))
					require.Equal(t, "claude-scripted", string(m.Model))
					require.True(t, strings.HasPrefix(m.ID, "msg_"), m.ID)
					require.Equal(t, int64(3), m.Usage.OutputTokens, "estimated: three words")
					require.Positive(t, m.Usage.InputTokens)
				}},
				{"thinking and its signature", "why", func(t *testing.T, m *anthropic.Message) {
					require.Len(t, m.Content, 2)
					th := m.Content[0].AsThinking()
					require.Equal(t, "thinking", string(th.Type))
					require.Equal(t, "The user asks why. A short answer will do.", th.Thinking)
					require.Equal(t, Signature(th.Thinking), th.Signature)
					require.Regexp(t, `^sig-[0-9a-f]{64}$`, th.Signature)
					require.Equal(t, "Because.", m.Content[1].Text)
				}},
				{"tool use", "What is 2 + 3?", func(t *testing.T, m *anthropic.Message) {
					require.Len(t, m.Content, 1)
					tu := m.Content[0].AsToolUse()
					require.Equal(t, "tool_use", string(tu.Type))
					require.Equal(t, "calculator", tu.Name)
					require.Regexp(t, `^toolu_\d+$`, tu.ID)
					require.JSONEq(t, `{"expression": "2 + 3"}`, string(tu.Input))
					require.Equal(t, anthropic.StopReasonToolUse, m.StopReason)
				}},
				{"usage with the cache", "count", func(t *testing.T, m *anthropic.Message) {
					require.Equal(t, int64(3), m.Usage.InputTokens, "20 prompt tokens less 12 read and 5 written")
					require.Equal(t, int64(12), m.Usage.CacheReadInputTokens)
					require.Equal(t, int64(5), m.Usage.CacheCreationInputTokens)
					require.Equal(t, int64(3), m.Usage.OutputTokens)
				}},
				{"finish reason translated", "ramble", func(t *testing.T, m *anthropic.Message) {
					require.Equal(t, anthropic.StopReasonMaxTokens, m.StopReason)
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					params := userParams(anthropic.NewTextBlock(tt.ask))
					params.Tools = calculatorTool()
					m, err := ask(t, c, params, stream)
					require.NoError(t, err)
					tt.check(t, m)
					reqs := srv.Requests()
					last := reqs[len(reqs)-1]
					require.Equal(t, APIAnthropic, last.API)
					require.Equal(t, stream, last.Stream)
					require.Equal(t, 1024, last.MaxTokens)
					require.Equal(t, []string{"calculator"}, last.Tools)
				})
			}
		})
	}
}

// TestAnthropicToolRoundTrip: the tool_use the SDK got is sent back with a
// tool_result, which the tool condition matches; both are recorded as
// OpenAI's would be.
func TestAnthropicToolRoundTrip(t *testing.T) {
	srv := start(t, anthropicScript)
	c := anthropicClient(srv)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			params := userParams(anthropic.NewTextBlock("What is 2 + 3?"))
			params.Tools = calculatorTool()
			m, err := ask(t, c, params, stream)
			require.NoError(t, err)
			tu := m.Content[0].AsToolUse()

			params.Messages = append(params.Messages, m.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, "5", false)))
			m, err = ask(t, c, params, stream)
			require.NoError(t, err)
			require.Equal(t, "The result is 5.", m.Content[0].Text)

			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			require.Equal(t, "answer", last.Rule)
			require.Len(t, last.Messages, 3)
			calls := last.Messages[1].ToolCalls
			require.Len(t, calls, 1)
			require.Equal(t, tu.ID, calls[0].ID)
			require.Equal(t, "calculator", calls[0].Name)
			require.JSONEq(t, `{"expression": "2 + 3"}`, calls[0].Arguments)
			require.Equal(t, "tool", last.Messages[2].Role)
			require.Equal(t, tu.ID, last.Messages[2].ToolCallID)
			require.Equal(t, "5", last.Messages[2].Content)
		})
	}
}

// TestAnthropicThinkingSentBack: a thinking block sent back on the next
// call is recorded with its signature, with the request's thinking config;
// one without a signature is refused, as Anthropic refuses it.
func TestAnthropicThinkingSentBack(t *testing.T) {
	srv := start(t, anthropicScript)
	c := anthropicClient(srv)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			params := userParams(anthropic.NewTextBlock("why"))
			params.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
			m, err := ask(t, c, params, stream)
			require.NoError(t, err)
			thinking := m.Content[0].AsThinking()

			params.Messages = append(params.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("hello")))
			_, err = ask(t, c, params, stream)
			require.NoError(t, err)
			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			require.Equal(t, "hello", last.Rule)
			require.JSONEq(t, `{"type": "enabled", "budget_tokens": 1024}`, string(last.Thinking))
			sent := last.Messages[1]
			require.Equal(t, "assistant", sent.Role)
			require.Equal(t, thinking.Thinking, sent.Reasoning)
			require.Equal(t, Signature(thinking.Thinking), sent.Signature)
			require.Equal(t, "Because.", sent.Content)

			params.Messages[1] = anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("", thinking.Thinking), anthropic.NewTextBlock("Because."))
			_, err = ask(t, c, params, stream)
			var apiErr *anthropic.Error
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
			require.Equal(t, "invalid_request_error", string(apiErr.Type()))
			require.Contains(t, apiErr.RawJSON(), "messages.1.content.0.signature: thinking block signature required")
		})
	}
	// A request without thinking records none.
	_, err := ask(t, c, userParams(anthropic.NewTextBlock("hello")), false)
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Nil(t, reqs[len(reqs)-1].Thinking)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestAnthropicImages: images and documents of a user message, and images
// a tool returned, are recorded as parts, and has_image tells a message
// with an image from one without.
func TestAnthropicImages(t *testing.T) {
	srv := start(t, anthropicScript)
	c := anthropicClient(srv)
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	pdf := []byte("%PDF-1.7 a tiny document")
	enc := base64.StdEncoding.EncodeToString

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			m, err := ask(t, c, userParams(
				anthropic.NewTextBlock("Describe this"),
				anthropic.NewImageBlockBase64("image/png", enc(png)),
				anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.jpg"}),
				anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: enc(pdf)}),
			), stream)
			require.NoError(t, err)
			require.Equal(t, "A red square.", m.Content[0].Text)
			reqs := srv.Requests()
			got := reqs[len(reqs)-1].Messages
			require.Len(t, got, 1)
			require.Equal(t, "Describe this", got[0].Content)
			require.Equal(t, []Part{
				{Type: "text", Text: "Describe this"},
				{Type: "image", MIMEType: "image/png", DataLen: len(png), DataSHA256: digest(png)},
				{Type: "image", URL: "https://example.com/cat.jpg"},
				{Type: "file", MIMEType: "application/pdf", DataLen: len(pdf), DataSHA256: digest(pdf)},
			}, got[0].Parts)

			m, err = ask(t, c, userParams(anthropic.NewTextBlock("Describe this")), stream)
			require.NoError(t, err)
			require.Equal(t, "I see no image.", m.Content[0].Text)
		})
	}

	t.Run("in a tool result", func(t *testing.T) {
		params := userParams(anthropic.NewTextBlock("What is 6 * 7?"))
		params.Tools = calculatorTool()
		m, err := ask(t, c, params, false)
		require.NoError(t, err)
		tu := m.Content[0].AsToolUse()
		result := anthropic.ToolResultBlockParam{ToolUseID: tu.ID, Content: []anthropic.ToolResultBlockParamContentUnion{
			{OfText: &anthropic.TextBlockParam{Text: "42, see the chart"}},
			{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
				OfBase64: &anthropic.Base64ImageSourceParam{MediaType: "image/png", Data: enc(png)}}}},
		}}
		params.Messages = append(params.Messages, m.ToParam(),
			anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfToolResult: &result}))
		m, err = ask(t, c, params, false)
		require.NoError(t, err)
		require.Equal(t, "The result is 42, see the chart.", m.Content[0].Text, "the tool condition matches the result's text")
		reqs := srv.Requests()
		tool := reqs[len(reqs)-1].Messages[2]
		require.Equal(t, Message{Role: "tool", ToolCallID: tu.ID, Content: "42, see the chart", Parts: []Part{
			{Type: "text", Text: "42, see the chart"},
			{Type: "image", MIMEType: "image/png", DataLen: len(png), DataSHA256: digest(png)},
		}}, tool)
	})
}

// TestOpenAIImages: image_url parts (by URL and as data: URLs) and file
// parts of a chat-completions request are recorded, and has_image holds
// for them too.
func TestOpenAIImages(t *testing.T) {
	srv := start(t, anthropicScript)
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	pdf := []byte("%PDF-1.7 a tiny document")

	t.Run("through the client", func(t *testing.T) {
		resp, err := client(t, srv).GenerateContent(t.Context(), []llms.MessageContent{{Role: llms.ChatMessageTypeHuman,
			Parts: []llms.ContentPart{llms.TextPart("Describe this"),
				llms.ImageURLPart("data:image/png;base64," + base64.StdEncoding.EncodeToString(png)),
				llms.ImageURLPart("https://example.com/cat.jpg")}}})
		require.NoError(t, err)
		require.Equal(t, "A red square.", resp.Choices[0].Content)
		reqs := srv.Requests()
		r := reqs[len(reqs)-1]
		require.Equal(t, APIOpenAI, r.API)
		require.Equal(t, []Part{
			{Type: "text", Text: "Describe this"},
			{Type: "image", MIMEType: "image/png", DataLen: len(png), DataSHA256: digest(png)},
			{Type: "image", URL: "https://example.com/cat.jpg"},
		}, r.Messages[0].Parts)
	})

	t.Run("raw parts", func(t *testing.T) {
		body := `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"Describe this"},
			{"type":"image_url","image_url":"data:image/gif,GIF89a%20x"},
			{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + base64.StdEncoding.EncodeToString(pdf) + `"}},
			{"type":"file","file":{"file_id":"file-123"}}]}]}`
		resp := post(t, srv, body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		reqs := srv.Requests()
		require.Equal(t, []Part{
			{Type: "text", Text: "Describe this"},
			{Type: "image", MIMEType: "image/gif", DataLen: 8, DataSHA256: digest([]byte("GIF89a x"))},
			{Type: "file", Name: "a.pdf", MIMEType: "application/pdf", DataLen: len(pdf), DataSHA256: digest(pdf)},
			{Type: "file", FileID: "file-123"},
		}, reqs[len(reqs)-1].Messages[0].Parts)
		require.Equal(t, "describe", reqs[len(reqs)-1].Rule)
	})

	t.Run("bad data is refused", func(t *testing.T) {
		for _, part := range []string{
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,@@@"}}`,
			`{"type":"image_url","image_url":{}}`,
			`{"type":"image_url","image_url":{"url":"data:image/png;base64"}}`,
			`{"type":"file"}`,
			`{"type":"binary","binary":{"mime_type":"image/png","data":"aGk="}}`,
		} {
			resp := post(t, srv, `{"model":"m","messages":[{"role":"user","content":[`+part+`]}]}`)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, part)
			var body errorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			require.Contains(t, body.Error.Message, "messages[0].content[0]", part)
		}
	})
}

// TestAnthropicFaults: a fault reaches the SDK as Anthropic's errors do:
// its status, error type, Retry-After and rate-limit headers; a cut stream
// is an error, not a short answer.
func TestAnthropicFaults(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := start(t, anthropicScript)
			c := anthropicClient(srv)
			tests := []struct {
				ask, errType string
				status       int
				header       map[string]string
			}{
				{"slow", "rate_limit_error", http.StatusTooManyRequests,
					map[string]string{"Retry-After": "7", "Anthropic-Ratelimit-Requests-Remaining": "0"}},
				{"overloaded", "overloaded_error", 529, nil},
			}
			for _, tt := range tests {
				_, err := ask(t, c, userParams(anthropic.NewTextBlock(tt.ask)), stream)
				var apiErr *anthropic.Error
				require.ErrorAs(t, err, &apiErr, tt.ask)
				require.Equal(t, tt.status, apiErr.StatusCode)
				require.Equal(t, tt.errType, string(apiErr.Type()))
				require.Regexp(t, `^req_scripted_\d+$`, apiErr.RequestID)
				for k, v := range tt.header {
					require.Equal(t, v, apiErr.Response.Header.Get(k), k)
				}
				var body anthropicError
				require.NoError(t, json.Unmarshal([]byte(apiErr.RawJSON()), &body))
				require.Equal(t, "error", body.Type)
				require.Contains(t, body.Error.Message, fmt.Sprintf("%q", tt.ask))
			}
			// times: 1 — the next one answers.
			m, err := ask(t, c, userParams(anthropic.NewTextBlock("slow")), stream)
			require.NoError(t, err)
			require.Equal(t, "ok", m.Content[0].Text)

			_, err = ask(t, c, userParams(anthropic.NewTextBlock("cut")), stream)
			require.Error(t, err, "a cut reply must not look like a success")
		})
	}
}

// sseEvent is one event of a stream.
type sseEvent struct {
	name string
	data map[string]any
}

func anthropicEvents(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "event: "):
			require.Empty(t, name, "an event line follows a data line")
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NotEmpty(t, name, "each data line has its event line")
			var data map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
			require.Equal(t, name, data["type"], "the event names its data's type")
			out = append(out, sseEvent{name: name, data: data})
			name = ""
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func postAnthropic(t *testing.T, srv *Server, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.RootURL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "anything")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestAnthropicStreamWireFormat: the events come in Anthropic's order,
// the signature after the thinking and before its block stops, the tool's
// input in fragments of a few bytes.
func TestAnthropicStreamWireFormat(t *testing.T) {
	srv := start(t, `
pacing: {chunk_words: 2}
rules:
  - reply:
      reasoning: 'Two and three make five, I think.'
      text: 'Let me check.'
      tool_calls: [{name: calculator, arguments: '{"expression": "2 + 3", "precise": true}'}]
`)
	resp := postAnthropic(t, srv, "/messages", `{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"add"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := anthropicEvents(t, resp.Body)

	var names []string
	for _, e := range events {
		if n := e.name; len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	require.Equal(t, []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}, names)

	start := events[0].data["message"].(map[string]any)
	require.Equal(t, []any{}, start["content"])
	require.Nil(t, start["stop_reason"])
	require.Contains(t, start["usage"], "input_tokens")

	deltas := map[string][]string{} // per delta type, its pieces
	var kinds []string
	for _, e := range events {
		switch e.name {
		case "content_block_start":
			kinds = append(kinds, e.data["content_block"].(map[string]any)["type"].(string))
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			typ := d["type"].(string)
			require.Equal(t, float64(len(kinds)-1), e.data["index"])
			for _, k := range []string{"thinking", "signature", "text", "partial_json"} {
				if v, ok := d[k]; ok {
					deltas[typ] = append(deltas[typ], v.(string))
				}
			}
		}
	}
	require.Equal(t, []string{"thinking", "text", "tool_use"}, kinds)
	require.Equal(t, []string{"Two and", " three make", " five, I", " think."}, deltas["thinking_delta"])
	require.Equal(t, []string{Signature("Two and three make five, I think.")}, deltas["signature_delta"])
	require.Equal(t, "Let me check.", strings.Join(deltas["text_delta"], ""))
	require.Equal(t, `{"expression": "2 + 3", "precise": true}`, strings.Join(deltas["input_json_delta"], ""))
	require.Greater(t, len(deltas["input_json_delta"]), 3)
	for _, f := range deltas["input_json_delta"] {
		require.LessOrEqual(t, len(f), argFragmentBytes)
	}
	// The signature closes the thinking block.
	for i, e := range events {
		if e.name == "content_block_stop" && e.data["index"] == float64(0) {
			require.Equal(t, "signature_delta", events[i-1].data["delta"].(map[string]any)["type"])
		}
	}
	md := events[len(events)-2].data
	require.Equal(t, "tool_use", md["delta"].(map[string]any)["stop_reason"])
	require.Positive(t, md["usage"].(map[string]any)["output_tokens"])
}

// TestAnthropicRecordedRequest: the members a test checks are recorded,
// cache_control breakpoints counted wherever they are, and the top-level
// system prompt is what the system condition matches.
func TestAnthropicRecordedRequest(t *testing.T) {
	srv := start(t, anthropicScript)
	body := `{"model":"claude-x","max_tokens":512,"temperature":0.5,
		"cache_control":{"type":"ephemeral"},
		"system":[{"type":"text","text":"You are a pirate."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"calculator","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],
		"thinking":{"type":"adaptive"},
		"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},
		"messages":[
			{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
			{"role":"user","content":"and hello"}]}`
	resp := postAnthropic(t, srv, "/v1/messages", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var msg struct {
		Type    string `json:"type"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	require.Equal(t, "message", msg.Type)
	require.Equal(t, "Arr.", msg.Content[0].Text)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, "pirate", r.Rule)
	require.Equal(t, APIAnthropic, r.API)
	require.Equal(t, "claude-x", r.Model)
	require.Equal(t, "You are a pirate.\nBe brief.", r.System)
	require.Equal(t, 512, r.MaxTokens)
	require.InDelta(t, 0.5, *r.Temperature, 1e-9)
	require.Equal(t, []string{"calculator"}, r.Tools)
	require.JSONEq(t, `[{"name":"calculator","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}]`, r.ToolsJSON)
	require.Equal(t, 4, r.CacheControl, "request, system block, tool, message block")
	require.JSONEq(t, `{"type":"adaptive"}`, string(r.Thinking))
	require.JSONEq(t, `{"type":"json_schema","schema":{"type":"object"}}`, string(r.ResponseFormat))
	require.Equal(t, []Message{
		{Role: "user", Content: "hi", Parts: []Part{{Type: "text", Text: "hi"}}, CacheControl: true},
		{Role: "user", Content: "and hello"},
	}, r.Messages, "messages need not alternate")
}

// TestAnthropicBadRequests: what Anthropic refuses is refused with its
// error shape, saying what is wrong.
func TestAnthropicBadRequests(t *testing.T) {
	srv := start(t, anthropicScript)
	user := `"messages":[{"role":"user","content":"hello"}]`
	tests := []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"no max_tokens", "/v1/messages", `{"model":"m",` + user + `}`, 400, "max_tokens: Field required"},
		{"zero max_tokens", "/v1/messages", `{"model":"m","max_tokens":0,` + user + `}`, 400, "max_tokens: 0"},
		{"no messages", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[]}`, 400, "messages: at least one"},
		{"not json", "/v1/messages", `{`, 400, "invalid request body"},
		{"system role", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"x"}]}`, 400, `messages.0.role: "system"`},
		{"unsigned thinking", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"x"}]},{"role":"user","content":"hello"}]}`,
			400, "messages.1.content.0.signature: thinking block signature required"},
		{"bad base64", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"@@"}}]}]}`, 400, "messages.0.content.0.source.data: invalid base64"},
		{"image without source", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
			400, "messages.0.content.0.source: Field required"},
		{"bad tool result", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"pigeon"}}]}]}]}`,
			400, `messages.0.content.0.content.0.source.type: "pigeon"`},
		{"no rule", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"zzz"}]}`, 400,
			`no script rule matches the last message: user "zzz"`},
		{"base URL with /v1", "/v1/v1/messages", `{}`, 404, "give it the server's root URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postAnthropic(t, srv, tt.path, tt.body)
			require.Equal(t, tt.status, resp.StatusCode)
			var body anthropicError
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			require.Equal(t, "error", body.Type)
			require.Equal(t, anthropicErrorType(tt.status), body.Error.Type)
			require.Contains(t, body.Error.Message, tt.want)
		})
	}

	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(srv.RootURL() + "/v1/messages")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	})

	t.Run("the SDK without max_tokens", func(t *testing.T) {
		params := userParams(anthropic.NewTextBlock("hello"))
		params.MaxTokens = 0
		c := anthropicClient(srv)
		_, err := c.Messages.New(t.Context(), params)
		var apiErr *anthropic.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Equal(t, "invalid_request_error", string(apiErr.Type()))
	})

	t.Run("tool arguments that are no object", func(t *testing.T) {
		srv := start(t, `rules: [{name: r, reply: {tool_calls: [{name: f, arguments: 'not json'}]}}]`)
		_, err := ask(t, anthropicClient(srv), userParams(anthropic.NewTextBlock("x")), true)
		var apiErr *anthropic.Error
		require.True(t, errors.As(err, &apiErr), "%v", err)
		require.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
		require.Contains(t, apiErr.RawJSON(), "are not a JSON object")
	})
}

// FuzzDecodeAnthropic: any body is decoded or refused with an error, never
// a panic, and a decoded one can be matched.
func FuzzDecodeAnthropic(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[
			{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}},
			{"type":"document","source":{"type":"content","content":[{"type":"text","text":"d"}]}},
			{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"i","name":"n","input":{}}]}]}`,
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`,
		`{"max_tokens":1,"messages":[{"role":"user","content":[{}]}]}`,
		`{"max_tokens":1,"messages":[{"role":"user","content":null}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeAnthropic(body)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		_ = toConversation(in.rec)
		requireCacheable(t, in.rec)
	})
}

// requireCacheable checks what the prompt cache makes of a decoded
// request: its cacheable part within its prompt, and what it counts
// within what it was sent.
func requireCacheable(t *testing.T, rec Request) {
	text, cacheable := promptText(rec)
	require.GreaterOrEqual(t, cacheable, 0)
	require.LessOrEqual(t, cacheable, len(text))
	cache := newPromptCache(PromptCache{MinTokens: 1, BlockTokens: 1, MaxBlocks: 64})
	for range 2 {
		u := cache.use(rec)
		require.LessOrEqual(t, u.cached+u.written, u.prompt)
		require.GreaterOrEqual(t, u.cached, 0)
	}
	require.LessOrEqual(t, len(cache.blocks), 64)
}

// FuzzDecodeOpenAI: likewise for chat-completions requests and their
// content parts.
func FuzzDecodeOpenAI(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}},
			{"type":"image_url","image_url":"https://x/y.png"},{"type":"file","file":{"file_data":"data:,a%20b"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeOpenAI(body)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		_ = toConversation(in.rec)
		requireCacheable(t, in.rec)
	})
}
