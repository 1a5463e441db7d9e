package scripted

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"
)

const testScript = `
pacing: {chunk_words: 1}
rules:
  - name: calculate
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '(.+)'}
    reply: {text: 'The result is $1.'}
  - name: two-tools
    when: {user: 'weather and time'}
    reply:
      text: 'Checking both.'
      tool_calls:
        - {name: weather, arguments: '{"city": "Zürich", "unit": "celsius"}'}
        - {name: clock, arguments: '{"tz": "Europe/Zurich"}'}
  - name: flaky
    when: {user: 'flaky'}
    fault: {status: 500, times: 2}
    reply: {text: 'recovered'}
  - name: slow
    when: {user: 'slow'}
    fault: {status: 429, retry_after_sec: 1, times: 1}
    reply: {text: 'ok'}
  - name: bad
    when: {user: 'bad'}
    fault: {status: 400, times: -1}
  - name: cut
    when: {user: 'cut'}
    fault: {cut_after_chunks: 3, times: 1}
    reply: {text: 'a long streamed answer that will be cut'}
  - name: counted
    when: {user: 'count'}
    reply: {text: 'one two three', usage: {prompt_tokens: 11, completion_tokens: 3, cached_tokens: 4, reasoning_tokens: 2}}
  - name: story
    when: {user: 'story'}
    reply: {text: 'Once upon a time there was a scripted model that streamed every word of its story.'}
`

func start(t *testing.T, yaml string) *Server {
	t.Helper()
	script, err := Parse([]byte(yaml))
	require.NoError(t, err)
	srv, err := Start("127.0.0.1:0", script, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

func client(t *testing.T, srv *Server) *openai.LLM {
	t.Helper()
	llm, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithToken("test-key"), openai.WithModel("scripted-1"),
		openai.WithHTTPClient(&http.Client{}))
	require.NoError(t, err)
	return llm
}

func human(text string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeHuman, text) }

// post sends a raw chat request and returns the response.
func post(t *testing.T, srv *Server, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer anything")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func userRequest(text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":          "m",
		"messages":       []map[string]any{{"role": "user", "content": text}},
		"stream":         stream,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return string(b)
}

// sse reads the data lines of a stream.
func sse(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		require.True(t, strings.HasPrefix(line, "data: "), "line %q", line)
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	require.NoError(t, sc.Err())
	return out
}

func TestDemoConversation(t *testing.T) {
	srv, err := Start("127.0.0.1:0", Demo(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	llm := client(t, srv)
	ctx := t.Context()
	tools := []llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{Name: "calculator",
		Parameters: map[string]any{"type": "object"}}}}

	resp, err := llm.GenerateContent(ctx, []llms.MessageContent{human("What is 12.5 * 4?")}, llms.WithTools(tools))
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].ToolCalls, 1)
	call := resp.Choices[0].ToolCalls[0]
	require.Equal(t, "calculator", call.FunctionCall.Name)
	require.JSONEq(t, `{"expression": "12.5 * 4"}`, call.FunctionCall.Arguments)

	for _, result := range []string{"50", `{"result": 50}`, `{"expression": "12.5 * 4", "result": 50}`} {
		resp, err = llm.GenerateContent(ctx, []llms.MessageContent{
			human("What is 12.5 * 4?"),
			{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{call}},
			{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: call.ID, Name: "calculator", Content: result}}},
		})
		require.NoError(t, err)
		require.Equal(t, "12.5 * 4 = 50", resp.Choices[0].Content, "tool result %s", result)
	}

	resp, err = llm.GenerateContent(ctx, []llms.MessageContent{human("Hello there")})
	require.NoError(t, err)
	require.Contains(t, resp.Choices[0].Content, "Hello!")

	resp, err = llm.GenerateContent(ctx, []llms.MessageContent{human("Tell me a joke")})
	require.NoError(t, err)
	require.Contains(t, resp.Choices[0].Content, "I don't know.")
	require.Equal(t, 1, srv.Served("calculate"))
	require.Equal(t, 3, srv.Served("answer"))
}

func TestToolRoundTripThroughClient(t *testing.T) {
	srv := start(t, testScript)
	llm := client(t, srv)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var opts []llms.CallOption
			if stream {
				opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
			}
			resp, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("What is 2 + 3?")}, opts...)
			require.NoError(t, err)
			c := resp.Choices[0]
			require.Equal(t, "tool_calls", c.StopReason)
			require.Len(t, c.ToolCalls, 1)
			require.Regexp(t, `^call_\d+$`, c.ToolCalls[0].ID)
			require.Equal(t, "calculator", c.ToolCalls[0].FunctionCall.Name)
			require.Equal(t, `{"expression": "2 + 3"}`, c.ToolCalls[0].FunctionCall.Arguments)

			resp, err = llm.GenerateContent(t.Context(), []llms.MessageContent{
				human("What is 2 + 3?"),
				{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{c.ToolCalls[0]}},
				{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: c.ToolCalls[0].ID, Content: "5"}}},
			}, opts...)
			require.NoError(t, err)
			require.Equal(t, "The result is 5.", resp.Choices[0].Content)
			require.Equal(t, "stop", resp.Choices[0].StopReason)

			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			require.Equal(t, "answer", last.Rule)
			require.Equal(t, stream, last.Stream)
			require.Len(t, last.Messages, 3)
			require.Equal(t, c.ToolCalls[0].ID, last.Messages[1].ToolCalls[0].ID)
			require.Equal(t, c.ToolCalls[0].ID, last.Messages[2].ToolCallID)
		})
	}
}

func TestTwoToolCallsThroughClient(t *testing.T) {
	srv := start(t, testScript)
	llm := client(t, srv)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var opts []llms.CallOption
			if stream {
				opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
			}
			resp, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("weather and time please")}, opts...)
			require.NoError(t, err)
			c := resp.Choices[0]
			require.Equal(t, "Checking both.", c.Content)
			require.Len(t, c.ToolCalls, 2)
			require.NotEqual(t, c.ToolCalls[0].ID, c.ToolCalls[1].ID)
			require.Equal(t, "weather", c.ToolCalls[0].FunctionCall.Name)
			require.Equal(t, `{"city": "Zürich", "unit": "celsius"}`, c.ToolCalls[0].FunctionCall.Arguments)
			require.Equal(t, "clock", c.ToolCalls[1].FunctionCall.Name)
			require.Equal(t, `{"tz": "Europe/Zurich"}`, c.ToolCalls[1].FunctionCall.Arguments)
		})
	}
}

func TestStreamWireFormat(t *testing.T) {
	srv := start(t, testScript)
	resp := post(t, srv, userRequest("weather and time", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	data := sse(t, resp.Body)
	require.Equal(t, "[DONE]", data[len(data)-1])

	var text strings.Builder
	type call struct {
		id, name string
		args     strings.Builder
		frags    int
	}
	calls := map[int]*call{}
	var finish string
	var usage *wireUsage
	for _, d := range data[:len(data)-1] {
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		require.Equal(t, "chat.completion.chunk", c.Object)
		if len(c.Choices) == 0 {
			usage = c.Usage
			continue
		}
		require.Nil(t, c.Usage)
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			text.WriteString(*ch.Delta.Content)
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		for _, tc := range ch.Delta.ToolCalls {
			require.NotNil(t, tc.Index, "every tool-call delta has an index")
			cl := calls[*tc.Index]
			if cl == nil {
				require.NotEmpty(t, tc.ID, "the first delta of a call carries its id")
				require.Equal(t, "function", tc.Type)
				cl = &call{id: tc.ID, name: tc.Function.Name}
				calls[*tc.Index] = cl
			} else {
				require.Empty(t, tc.ID)
				require.Empty(t, tc.Type, "continuation deltas have no type")
				require.NotEmpty(t, tc.Function.Arguments, "continuation deltas are never empty")
				cl.frags++
			}
			cl.args.WriteString(tc.Function.Arguments)
		}
	}
	require.Equal(t, "Checking both.", text.String())
	require.Equal(t, "tool_calls", finish)
	require.Len(t, calls, 2)
	require.Equal(t, "weather", calls[0].name)
	require.Equal(t, `{"city": "Zürich", "unit": "celsius"}`, calls[0].args.String())
	require.Greater(t, calls[0].frags, 2, "arguments are split over several chunks")
	require.Equal(t, "clock", calls[1].name)
	require.NotNil(t, usage)
	require.Positive(t, usage.PromptTokens)
	require.Positive(t, usage.CompletionTokens)
	require.Equal(t, usage.PromptTokens+usage.CompletionTokens, usage.TotalTokens)
}

func TestStreamPacing(t *testing.T) {
	srv := start(t, strings.Replace(testScript, "pacing: {chunk_words: 1}", "pacing: {chunk_words: 2}", 1))
	resp := post(t, srv, userRequest("count", true))
	var pieces []string
	for _, d := range sse(t, resp.Body) {
		var c chunk
		if d == "[DONE]" || json.Unmarshal([]byte(d), &c) != nil || len(c.Choices) == 0 {
			continue
		}
		if p := c.Choices[0].Delta.Content; p != nil && *p != "" {
			pieces = append(pieces, *p)
		}
	}
	require.Equal(t, []string{"one two", " three"}, pieces)
}

func TestUsage(t *testing.T) {
	srv := start(t, testScript)
	llm := client(t, srv)
	for _, stream := range []bool{false, true} {
		var opts []llms.CallOption
		if stream {
			opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
		}
		resp, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("count")}, opts...)
		require.NoError(t, err)
		info := resp.Choices[0].GenerationInfo
		require.Equal(t, 11, info["PromptTokens"], "stream=%v", stream)
		require.Equal(t, 3, info["CompletionTokens"])
		require.Equal(t, 14, info["TotalTokens"])
		require.Equal(t, 4, info["PromptCachedTokens"], "stream=%v", stream)
		require.Equal(t, 2, info["CompletionReasoningTokens"], "stream=%v", stream)

		// Estimated usage is reported too.
		resp, err = llm.GenerateContent(t.Context(), []llms.MessageContent{human("story")}, opts...)
		require.NoError(t, err)
		require.Equal(t, 16, resp.Choices[0].GenerationInfo["CompletionTokens"])
		require.Positive(t, resp.Choices[0].GenerationInfo["PromptTokens"])
	}
}

func TestFaults(t *testing.T) {
	srv := start(t, testScript)

	t.Run("status then recovery", func(t *testing.T) {
		for i := range 2 {
			resp := post(t, srv, userRequest("flaky", false))
			require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "attempt %d", i)
			var body errorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			require.Equal(t, "server_error", body.Error.Type)
			require.Contains(t, body.Error.Message, `"flaky"`)
		}
		resp := post(t, srv, userRequest("flaky", false))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, 3, srv.Served("flaky"))
	})

	t.Run("429 with Retry-After", func(t *testing.T) {
		resp := post(t, srv, userRequest("slow", false))
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		var body errorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "rate_limit_exceeded", *body.Error.Code)
		require.Equal(t, http.StatusOK, post(t, srv, userRequest("slow", false)).StatusCode)
	})

	t.Run("always", func(t *testing.T) {
		for range 3 {
			require.Equal(t, http.StatusBadRequest, post(t, srv, userRequest("bad", true)).StatusCode)
		}
	})

	t.Run("cut stream", func(t *testing.T) {
		resp := post(t, srv, userRequest("cut", true))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		require.Equal(t, 3, bytes.Count(body, []byte("data: ")))
		require.NotContains(t, string(body), "[DONE]")

		// times: 1 — the next request streams to the end.
		resp = post(t, srv, userRequest("cut", true))
		data := sse(t, resp.Body)
		require.Equal(t, "[DONE]", data[len(data)-1])
	})

	t.Run("cut non-streamed", func(t *testing.T) {
		srv := start(t, `rules: [{name: c, fault: {cut_after_chunks: 1}, reply: {text: some answer}}]`)
		resp := post(t, srv, userRequest("x", false))
		_, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})

	t.Run("through the client", func(t *testing.T) {
		srv := start(t, testScript)
		llm := client(t, srv)
		_, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("cut")},
			llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
		require.Error(t, err, "a cut stream must not look like a success")
		_, err = llm.GenerateContent(t.Context(), []llms.MessageContent{human("flaky")})
		require.ErrorContains(t, err, "500")
	})
}

func TestNoMatchingRule(t *testing.T) {
	srv := start(t, `rules: [{when: {user: '^only this$'}, reply: {text: x}}]`)
	resp := post(t, srv, userRequest("something else", false))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var body errorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, `no script rule matches the last message: user "something else"`, body.Error.Message)
	require.Equal(t, "invalid_request_error", body.Error.Type)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Empty(t, reqs[0].Rule)
	require.Equal(t, http.StatusBadRequest, reqs[0].Status)
}

func TestBadRequests(t *testing.T) {
	srv := start(t, testScript)
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"not json", http.MethodPost, "/v1/chat/completions", "{", http.StatusBadRequest},
		{"no messages", http.MethodPost, "/chat/completions", `{"model":"m","messages":[]}`, http.StatusBadRequest},
		{"wrong method", http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{"unknown path", http.MethodPost, "/v1/completions", "{}", http.StatusNotFound},
		{"embeddings without input", http.MethodPost, "/v1/embeddings", "{}", http.StatusBadRequest},
		{"models", http.MethodGet, "/v1/models", "", http.StatusOK},
	}
	base := strings.TrimSuffix(srv.URL(), "/v1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, base+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tt.status, resp.StatusCode)
			var body map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			if tt.status != http.StatusOK {
				require.Contains(t, body, "error")
			} else {
				require.Equal(t, "list", body["object"])
			}
		})
	}
}

func TestRecordedRequest(t *testing.T) {
	srv := start(t, testScript)
	resp := post(t, srv, `{"model":"gpt-x","temperature":0.25,"max_completion_tokens":99,"prompt_cache_key":"agentflow-0123",
		"tools":[{"type":"function","function":{"name":"calculator","parameters":{}}}],
		"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"What is "},{"type":"text","text":"1+1?"}]}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, "calculate", r.Rule)
	require.Equal(t, "gpt-x", r.Model)
	require.Equal(t, []string{"calculator"}, r.Tools)
	require.Equal(t, `[{"type":"function","function":{"name":"calculator","parameters":{}}}]`, r.ToolsJSON, "the tools as sent, byte for byte")
	require.Equal(t, "agentflow-0123", r.PromptCacheKey)
	require.NotNil(t, r.Temperature)
	require.InDelta(t, 0.25, *r.Temperature, 1e-9)
	require.Equal(t, 99, r.MaxTokens)
	require.Equal(t, Message{Role: "user", Content: "What is 1+1?",
		Parts: []Part{{Type: "text", Text: "What is "}, {Type: "text", Text: "1+1?"}}}, r.Messages[1])
	require.Equal(t, "be brief", r.System)
	require.Equal(t, APIOpenAI, r.API)
	require.Equal(t, http.StatusOK, r.Status)
	require.False(t, r.Faulted)
}

// TestRecordedResponseFormat: a request's response_format is recorded as
// sent, and a request without one records none.
func TestRecordedResponseFormat(t *testing.T) {
	srv := start(t, testScript)
	format := `{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"n":{"type":"integer"}}},"strict":false}}`
	for _, body := range []string{
		`{"model":"m","response_format":` + format + `,"messages":[{"role":"user","content":"count"}]}`,
		`{"model":"m","response_format":null,"messages":[{"role":"user","content":"count"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"count"}]}`,
	} {
		resp := post(t, srv, body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	require.JSONEq(t, format, string(reqs[0].ResponseFormat))
	require.Nil(t, reqs[1].ResponseFormat)
	require.Nil(t, reqs[2].ResponseFormat)
}

// TestFaultHeaders: a fault's headers reach the client, as a provider's
// rate-limit headers do with its 429, and each request is recorded with
// the time it arrived.
func TestFaultHeaders(t *testing.T) {
	srv := start(t, `rules:
  - name: limited
    when: {user: limited}
    fault: {status: 429, times: 1, headers: {x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: 6m0s}}
    reply: {text: fine}
`)
	before := time.Now()
	resp := post(t, srv, userRequest("limited", false))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "0", resp.Header.Get("X-Ratelimit-Remaining-Requests"))
	require.Equal(t, "6m0s", resp.Header.Get("X-Ratelimit-Reset-Requests"))
	resp = post(t, srv, userRequest("limited", false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("X-Ratelimit-Reset-Requests"))
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.True(t, reqs[0].Faulted)
	require.False(t, reqs[0].At.Before(before))
	require.False(t, reqs[1].At.Before(reqs[0].At))
}

// TestRefuseFor: a stretch answers every matched request with a 429 and
// its Retry-After, whatever the rule says, then the rules answer again.
func TestRefuseFor(t *testing.T) {
	srv := start(t, `rules:
  - name: answer
    when: {user: '.'}
    reply: {text: fine}
`)
	srv.RefuseFor(time.Hour, 2)
	resp := post(t, srv, userRequest("hello", false))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	srv.RefuseFor(0, 2)
	resp = post(t, srv, userRequest("hello", false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, []int{http.StatusTooManyRequests, http.StatusOK}, []int{reqs[0].Status, reqs[1].Status})
	require.True(t, reqs[0].Faulted)
}

func TestMaxRecorded(t *testing.T) {
	script, err := Parse([]byte(testScript))
	require.NoError(t, err)
	srv, err := Start("127.0.0.1:0", script, Options{MaxRecorded: 2})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	for _, q := range []string{"count", "story", "flaky"} {
		post(t, srv, userRequest(q, false))
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "story", reqs[0].Rule)
	require.Equal(t, "flaky", reqs[1].Rule)
	require.True(t, reqs[1].Faulted)
	require.Equal(t, http.StatusInternalServerError, reqs[1].Status)
}

func TestParallelStreams(t *testing.T) {
	srv := start(t, strings.Replace(testScript, "pacing: {chunk_words: 1}", "pacing: {chunk_words: 1, delay_ms: 1}", 1))
	llm := client(t, srv)
	const n = 100
	want := "Once upon a time there was a scripted model that streamed every word of its story."
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			var got strings.Builder
			resp, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("story")},
				llms.WithStreamingFunc(func(_ context.Context, b []byte) error { got.Write(b); return nil }))
			switch {
			case err != nil:
				errs <- err
			case got.String() != want || resp.Choices[0].Content != want:
				errs <- fmt.Errorf("got %q / %q", got.String(), resp.Choices[0].Content)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, n, srv.Served("story"))
	// A handler returns just after the client has read its [DONE].
	require.Eventually(t, func() bool { return srv.InFlight() == 0 }, 5*time.Second, time.Millisecond)
}

func TestClientDisconnectStopsStream(t *testing.T) {
	srv := start(t, `
pacing: {delay_ms: 50}
rules: [{reply: {text: '`+strings.Repeat("word ", 400)+`'}}]`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(userRequest("hi", true)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "))
	require.Equal(t, 1, srv.InFlight())

	cancel() // 400 words at 50 ms would take 20 s
	require.Eventually(t, func() bool { return srv.InFlight() == 0 }, 2*time.Second, 10*time.Millisecond)
}

func TestCloseCutsStreamsAndIsIdempotent(t *testing.T) {
	script, err := Parse([]byte(`
pacing: {delay_ms: 50}
rules: [{reply: {text: '` + strings.Repeat("word ", 400) + `'}}]`))
	require.NoError(t, err)
	srv, err := Start("127.0.0.1:0", script, Options{})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(userRequest("hi", true)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()

	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a stream was in flight")
	}
	require.Zero(t, srv.InFlight())
	require.NoError(t, srv.Close())
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err)
}

func TestNewPanicsOnInvalidScript(t *testing.T) {
	require.PanicsWithValue(t, `scripted: invalid script: rule "x": when.user: error parsing regexp: missing closing ): `+"`(`",
		func() {
			New(&Script{Rules: []Rule{{Name: "x", When: When{User: "("}, Reply: Reply{Text: "a"}}}}, Options{})
		})
	_, err := Start("127.0.0.1:0", &Script{}, Options{})
	require.ErrorContains(t, err, "no rules")
}

const reasoningScript = `
pacing: {chunk_words: 2}
rules:
  - name: think
    when: {user: 'add (\d+) and (\d+)'}
    reply:
      reasoning: 'The user wants $1 + $2. I will use the calculator.'
      text: 'Let me add.'
      tool_calls: [{name: calculator, arguments: '{"expression": "$1 + $2"}'}]
`

// streamed is what a stream's chunks carry, joined per part.
type streamed struct {
	order     []string // "reasoning", "text", "tool" per chunk, in stream order (runs collapsed)
	reasoning strings.Builder
	text      strings.Builder
	args      strings.Builder
	argChunks int
	heads     []wireToolCall
}

func readStream(t *testing.T, data []string, field string) *streamed {
	t.Helper()
	s := &streamed{}
	mark := func(part string) {
		if len(s.order) == 0 || s.order[len(s.order)-1] != part {
			s.order = append(s.order, part)
		}
	}
	for _, d := range data {
		if d == "[DONE]" {
			continue
		}
		var raw struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &raw))
		if len(raw.Choices) == 0 {
			continue
		}
		delta := raw.Choices[0].Delta
		other := map[string]string{ReasoningContent: ReasoningPlain, ReasoningPlain: ReasoningContent}[field]
		require.NotContains(t, delta, other, "reasoning goes under %s only", field)
		if r, ok := delta[field]; ok {
			var piece string
			require.NoError(t, json.Unmarshal(r, &piece))
			s.reasoning.WriteString(piece)
			mark("reasoning")
		}
		if c, ok := delta["content"]; ok {
			var piece string
			require.NoError(t, json.Unmarshal(c, &piece))
			if piece != "" {
				s.text.WriteString(piece)
				mark("text")
			}
		}
		if tcs, ok := delta["tool_calls"]; ok {
			var calls []wireToolCall
			require.NoError(t, json.Unmarshal(tcs, &calls))
			for _, c := range calls {
				if c.ID != "" {
					s.heads = append(s.heads, c)
				} else {
					s.argChunks++
				}
				s.args.WriteString(c.Function.Arguments)
			}
			mark("tool")
		}
	}
	return s
}

func TestStreamReasoning(t *testing.T) {
	for _, field := range []string{"", ReasoningContent, ReasoningPlain} {
		t.Run("field="+field, func(t *testing.T) {
			script := reasoningScript
			if field != "" {
				script = "reasoning_field: " + field + "\n" + script
			}
			srv := start(t, script)
			want := field
			if want == "" {
				want = ReasoningContent
			}

			resp := post(t, srv, userRequest("add 2 and 3", true))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			s := readStream(t, sse(t, resp.Body), want)
			require.Equal(t, []string{"reasoning", "text", "tool"}, s.order, "reasoning streams before the text, the text before the tool calls")
			require.Equal(t, "The user wants 2 + 3. I will use the calculator.", s.reasoning.String())
			require.Equal(t, "Let me add.", s.text.String())
			require.Len(t, s.heads, 1)
			require.Equal(t, "calculator", s.heads[0].Function.Name)
			require.Empty(t, s.heads[0].Function.Arguments, "the first delta announces the call")
			require.Equal(t, `{"expression": "2 + 3"}`, s.args.String())
			require.GreaterOrEqual(t, s.argChunks, 3, "arguments come in several fragments")

			// A plain reply carries the reasoning in its message.
			resp = post(t, srv, userRequest("add 2 and 3", false))
			var body struct {
				Choices []struct {
					Message map[string]json.RawMessage `json:"message"`
				} `json:"choices"`
				Usage wireUsage `json:"usage"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			var reasoning string
			require.NoError(t, json.Unmarshal(body.Choices[0].Message[want], &reasoning))
			require.Equal(t, "The user wants 2 + 3. I will use the calculator.", reasoning)
			require.NotNil(t, body.Usage.CompletionTokensDetails)
			require.Equal(t, 11, body.Usage.CompletionTokensDetails.ReasoningTokens, "estimated: the reasoning's words")
		})
	}
}

// TestReasoningThroughClient: langchaingo's openai client reads
// reasoning_content deltas and hands them to its reasoning callback apart
// from the text.
func TestReasoningThroughClient(t *testing.T) {
	srv := start(t, reasoningScript)
	llm := client(t, srv)
	var reasoning, text strings.Builder
	resp, err := llm.GenerateContent(t.Context(), []llms.MessageContent{human("add 4 and 5")},
		llms.WithStreamingReasoningFunc(func(_ context.Context, r, c []byte) error {
			reasoning.Write(r)
			if !bytes.HasPrefix(c, []byte("[")) {
				text.Write(c)
			}
			return nil
		}))
	require.NoError(t, err)
	require.Equal(t, "The user wants 4 + 5. I will use the calculator.", reasoning.String())
	require.Equal(t, "Let me add.", text.String())
	require.Equal(t, "The user wants 4 + 5. I will use the calculator.", resp.Choices[0].ReasoningContent)
	require.Equal(t, "Let me add.", resp.Choices[0].Content)
}

// TestFallbackFaults: a rule can fault one model and not another (when:
// model), and say which error it is (fault: code), as providers refuse a
// prompt over the model's context window.
func TestFallbackFaults(t *testing.T) {
	srv := start(t, `
rules:
  - name: too-long
    when: {model: '^small$'}
    fault: {status: 400, code: context_length_exceeded, message: "This model's maximum context length is 8192 tokens.", times: -1}
  - name: large
    when: {model: '^large$'}
    reply: {text: 'answered by large'}
`)
	request := func(model string) *http.Response {
		b, err := json.Marshal(map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": "a long story"}}})
		require.NoError(t, err)
		return post(t, srv, string(b))
	}
	for range 2 {
		resp := request("small")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		var body errorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "invalid_request_error", body.Error.Type)
		require.NotNil(t, body.Error.Code)
		require.Equal(t, "context_length_exceeded", *body.Error.Code)
		require.Contains(t, body.Error.Message, "maximum context length")
	}
	resp := request("large")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var reply struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reply))
	require.Equal(t, "answered by large", reply.Choices[0].Message.Content)
	require.Equal(t, 2, srv.Served("too-long"))
	require.Equal(t, 1, srv.Served("large"))

	_, err := Parse([]byte("rules: [{name: r, fault: {code: context_length_exceeded, cut_after_chunks: 1}, reply: {text: x}}]"))
	require.ErrorContains(t, err, `rule "r": fault.code needs a status to answer with`)
}
