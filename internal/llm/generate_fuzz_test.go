package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
)

// FuzzGenerateResponse: whatever an OpenAI-compatible server answers with
// status 200 — an SSE stream or a JSON body, well-formed or not — Generate
// returns a reply or a clear error, never panics, and a streamed reply
// succeeds only when the stream ended with "[DONE]".
func FuzzGenerateResponse(f *testing.F) {
	const chunk = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}` + "\n\n"
	for _, s := range []struct {
		body   string
		stream bool
	}{
		{chunk + `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true},
		{chunk + `data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"1+1\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n", true},
		{chunk + `data: {"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"I think"}}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"reasoning":" hard"}}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"calculator","arguments":""}}]}}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\""}}]}}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"1+1\"}"}}]}}]}` + "\n\n" +
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n", true},
		{chunk, true},
		{chunk + "data: {not json\n\ndata: [DONE]\n\n", true},
		{"data: [DONE]\n\n", true},
		{": keep-alive\n\nevent: ping\ndata: {}\n\ndata: [DONE]\n\n", true},
		{"\x00\xff garbage", true},
		{`{"id":"c1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, false},
		{`{"choices":[]}`, false},
		{`{"choices":[{"message":{"tool_calls":[{"id":"","function":{"name":"calculator","arguments":""}}]}}]}`, false},
		{`{"choices":`, false},
		{`<html>502 Bad Gateway</html>`, false},
		{``, false},
	} {
		f.Add(s.body, s.stream)
	}

	var mu sync.Mutex
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := body
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(b))
	}))
	f.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL + "/v1", OpenAIAPIKey: "sk-fuzz-secret"})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, b string, stream bool) {
		mu.Lock()
		body = b
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := llm.Request{Model: "openai:gpt-test", Messages: user("hi"), Tools: []agent.Tool{calculator}}
		var streamed, chunkText, reasoning strings.Builder
		var calls []agent.ToolCall // assembled from the tool-call chunks, by index
		if stream {
			req.OnText = func(_ context.Context, s string) error { streamed.WriteString(s); return nil }
			req.OnChunk = func(_ context.Context, c llm.Chunk) error {
				switch c.Kind {
				case llm.ChunkText:
					chunkText.WriteString(c.Text)
				case llm.ChunkReasoning:
					reasoning.WriteString(c.Text)
				case llm.ChunkToolCall:
					d := c.ToolCall
					if d.Index == len(calls) {
						calls = append(calls, agent.ToolCall{ID: d.ID, Name: d.Name})
					}
					require.Less(t, d.Index, len(calls), "calls are announced in order")
					require.Equal(t, calls[d.Index].ID, d.ID)
					require.Equal(t, calls[d.Index].Name, d.Name)
					calls[d.Index].Arguments += d.Args
				}
				return nil
			}
		}
		resp, err := r.Generate(ctx, req)
		if err != nil {
			require.NoError(t, ctx.Err(), "the call ended by itself")
			require.NotEmpty(t, strings.TrimSpace(err.Error()))
			require.NotContains(t, err.Error(), "sk-fuzz-secret")
			var le *llm.Error
			require.True(t, errors.As(err, &le), "a provider failure is an *llm.Error: %v", err)
			require.Equal(t, "openai:gpt-test", le.Model)
			return
		}
		require.Equal(t, agent.RoleAssistant, resp.Message.Role)
		require.Equal(t, "openai:gpt-test", resp.Model)
		require.NotEmpty(t, resp.FinishReason)
		for _, c := range resp.Message.ToolCalls {
			require.NotEmpty(t, c.ID)
			require.NotEmpty(t, c.Arguments)
		}
		if stream {
			require.Contains(t, b, "[DONE]", "a stream without its end is incomplete")
			require.Equal(t, streamed.String(), chunkText.String(), "OnText and OnChunk see the same text")
			require.Equal(t, resp.Reasoning, reasoning.String(), "the reasoning chunks add up to the reply's")
			require.Len(t, calls, len(resp.Message.ToolCalls), "one announced call per tool call of the reply")
			for i, want := range resp.Message.ToolCalls {
				got := calls[i]
				if strings.TrimSpace(got.Arguments) == "" {
					got.Arguments = "{}"
				}
				require.Equal(t, want, got, "call %d: the chunks add up to the reply's call", i)
			}
		}
	})
}
