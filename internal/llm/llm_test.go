package llm_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
)

const testScript = `
pacing: {chunk_words: 1}
rules:
  - name: calc
    when: {user: 'compute (.+)'}
    reply:
      text: 'Let me compute.'
      tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]
  - name: answer
    when: {tool: '(.+)'}
    reply: {text: 'The answer is $1.', usage: {prompt_tokens: 30, completion_tokens: 5, cached_tokens: 12, reasoning_tokens: 3}}
  - name: throttled
    when: {user: 'throttle'}
    fault: {status: 429, retry_after_sec: 7, times: -1}
  - name: broken
    when: {user: 'broken'}
    fault: {status: 500, times: -1}
  - name: rejected
    when: {user: 'reject'}
    fault: {status: 400, message: 'bad request: sk-secret-123 is not allowed', times: -1}
  - name: too-long
    when: {user: 'too long'}
    fault: {status: 400, code: context_length_exceeded, message: 'too many tokens', times: -1}
  - name: too-long-said
    when: {user: 'said long'}
    fault: {status: 400, message: 'prompt is too long: 210000 tokens > 200000 maximum', times: -1}
  - name: cut
    when: {user: 'cut'}
    fault: {cut_after_chunks: 3, times: -1}
    reply: {text: 'one two three four five six seven'}
  - name: echo
    when: {user: '(.+)'}
    reply: {text: 'You said: $1'}
`

func start(t *testing.T) (*scripted.Server, *llm.Router) {
	t.Helper()
	script, err := scripted.Parse([]byte(testScript))
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", script, scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL(), OpenAIAPIKey: "sk-secret-123"})
	require.NoError(t, err)
	return srv, r
}

var calculator = agent.Tool{Name: "calculator", Description: "evaluates arithmetic",
	Parameters: []byte(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`)}

func user(s string) []agent.Message {
	return []agent.Message{{Role: agent.RoleSystem, Content: "be brief"}, {Role: agent.RoleUser, Content: s}}
}

func TestGenerate(t *testing.T) {
	_, r := start(t)
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			ctx := context.Background()
			var streamed strings.Builder
			req := llm.Request{Model: "openai:gpt-test", Messages: user("compute 2 + 3"), Tools: []agent.Tool{calculator}}
			if stream {
				req.OnText = func(_ context.Context, s string) error { streamed.WriteString(s); return nil }
			}
			resp, err := r.Generate(ctx, req)
			require.NoError(t, err)
			require.Equal(t, "openai:gpt-test", resp.Model)
			require.Equal(t, "tool_calls", resp.FinishReason)
			require.Equal(t, "Let me compute.", resp.Message.Content)
			require.Len(t, resp.Message.ToolCalls, 1)
			tc := resp.Message.ToolCalls[0]
			require.Equal(t, "calculator", tc.Name)
			require.JSONEq(t, `{"expression": "2 + 3"}`, tc.Arguments)
			require.NotEmpty(t, tc.ID)
			require.Positive(t, resp.Usage.TotalTokens)
			if stream {
				// Tool-call JSON never reaches OnText.
				require.Equal(t, "Let me compute.", streamed.String())
			}

			// The tool's result goes back and the model answers.
			msgs := append(user("compute 2 + 3"), resp.Message,
				agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: "5"})
			req.Messages = msgs
			streamed.Reset()
			resp, err = r.Generate(ctx, req)
			require.NoError(t, err)
			require.Equal(t, "The answer is 5.", resp.Message.Content)
			require.Equal(t, "stop", resp.FinishReason)
			require.Equal(t, agent.Usage{PromptTokens: 30, CompletionTokens: 5, TotalTokens: 35, CachedTokens: 12, ReasoningTokens: 3}, resp.Usage)
			if stream {
				require.Equal(t, "The answer is 5.", streamed.String())
			}
		})
	}
}

func TestGenerateSendsNoTemperatureUnlessAsked(t *testing.T) {
	srv, r := start(t)
	_, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("hello")})
	require.NoError(t, err)
	temp := 0.25
	_, err = r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("hello"), Temperature: &temp, MaxTokens: 50})
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Nil(t, reqs[0].Temperature)
	require.NotNil(t, reqs[1].Temperature)
	require.InDelta(t, 0.25, *reqs[1].Temperature, 1e-9)
	require.Equal(t, 50, reqs[1].MaxTokens)
}

func TestGenerateFailures(t *testing.T) {
	_, r := start(t)
	tests := []struct {
		prompt     string
		stream     bool
		status     int
		retryable  bool
		retryAfter time.Duration
		contains   string
		context    bool // refused as over the context window
	}{
		{prompt: "throttle", status: 429, retryable: true, retryAfter: 7 * time.Second},
		{prompt: "throttle", stream: true, status: 429, retryable: true, retryAfter: 7 * time.Second},
		{prompt: "broken", status: 500, retryable: true},
		{prompt: "reject", status: 400, retryable: false, contains: "[redacted] is not allowed"},
		{prompt: "cut", stream: true, status: 200, retryable: true},
		{prompt: "too long", status: 400, contains: "too many tokens", context: true},
		{prompt: "too long", stream: true, status: 400, context: true},
		{prompt: "said long", status: 400, contains: "prompt is too long", context: true},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			req := llm.Request{Model: "openai:m", Messages: user(tt.prompt)}
			var got strings.Builder
			if tt.stream {
				req.OnText = func(_ context.Context, s string) error { got.WriteString(s); return nil }
			}
			_, err := r.Generate(context.Background(), req)
			var le *llm.Error
			require.ErrorAs(t, err, &le, "error: %v", err)
			require.Equal(t, tt.status, le.Status)
			require.Equal(t, tt.retryable, le.Retryable)
			require.Equal(t, tt.retryAfter, le.RetryAfter)
			require.Equal(t, tt.context, le.ContextLength)
			require.Equal(t, "openai:m", le.Model)
			require.NotContains(t, err.Error(), "sk-secret-123")
			if tt.contains != "" {
				require.Contains(t, err.Error(), tt.contains)
			}
		})
	}
}

func TestGenerateStopsWhenOnTextFails(t *testing.T) {
	_, r := start(t)
	stop := errors.New("client gone")
	_, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("say many words please"),
		OnText: func(context.Context, string) error { return stop }})
	require.ErrorIs(t, err, stop)
	var le *llm.Error
	require.False(t, errors.As(err, &le))
}

func TestGenerateInvalidRequests(t *testing.T) {
	r, err := llm.New(llm.Config{})
	require.NoError(t, err)
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"no provider", llm.Request{Model: "gpt-4o", Messages: user("hi")}, `want "provider:model"`},
		{"unknown provider", llm.Request{Model: "acme:x", Messages: user("hi")}, `unknown provider "acme"`},
		{"unconfigured openai", llm.Request{Model: "openai:gpt-4o", Messages: user("hi")}, "set OPENAI_API_KEY"},
		{"unconfigured anthropic", llm.Request{Model: "anthropic:claude", Messages: user("hi")}, "set ANTHROPIC_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Generate(context.Background(), tt.req)
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}

	_, srvRouter := start(t)
	bad := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"no messages", llm.Request{Model: "openai:m"}, "no messages"},
		{"bad role", llm.Request{Model: "openai:m", Messages: []agent.Message{{Role: "robot", Content: "x"}}}, `unknown role "robot"`},
		{"tool result without id", llm.Request{Model: "openai:m", Messages: []agent.Message{{Role: agent.RoleTool, Content: "x"}}}, "without tool_call_id"},
		{"bad parameters", llm.Request{Model: "openai:m", Messages: user("hi"), Tools: []agent.Tool{{Name: "t", Parameters: []byte(`[1]`)}}}, "JSON Schema object"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := srvRouter.Generate(context.Background(), tt.req)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestRouterServesTheDomainsProviders: the catalog accepts the providers
// agent.Providers lists; the router has a client for each of them (one
// that says what to set while unconfigured) and for no other.
func TestRouterServesTheDomainsProviders(t *testing.T) {
	unconfigured, err := llm.New(llm.Config{})
	require.NoError(t, err)
	configured, err := llm.New(llm.Config{OpenAIAPIKey: "k", AnthropicAPIKey: "k", OllamaHost: "127.0.0.1:11434"})
	require.NoError(t, err)
	for _, p := range agent.Providers() {
		err := unconfigured.Check(p + ":m")
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", p, err)
		require.Contains(t, err.Error(), "is not configured: set ", p)
		require.NoError(t, configured.Check(p+":m"), p)
	}
	err = configured.Check("acme:m")
	require.ErrorContains(t, err, `unknown provider "acme" (known: `+strings.Join(agent.Providers(), ", ")+")")
}

func TestNewRejectsBadURLs(t *testing.T) {
	_, err := llm.New(llm.Config{OpenAIBaseURL: "localhost:8080"})
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
	require.Contains(t, err.Error(), "OPENAI_BASE_URL")
	_, err = llm.New(llm.Config{OllamaHost: "://"})
	require.Error(t, err)
}

func TestGenerateHonoursContext(t *testing.T) {
	_, r := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Generate(ctx, llm.Request{Model: "openai:m", Messages: user("hello")})
	require.ErrorIs(t, err, context.Canceled)
}

// TestProviderConnectionsAreReused: calls that stream at the same time
// each hold a connection to the provider; the next round of calls takes
// those connections again rather than opening new ones (Go's default
// transport kept two idle, and every other call paid a new handshake).
func TestProviderConnectionsAreReused(t *testing.T) {
	script, err := scripted.Parse([]byte(`
rules:
  - name: slow
    when: {user: '.+'}
    reply: {text: 'one two three', delay_ms: 200}
`))
	require.NoError(t, err)
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(scripted.New(script, scripted.Options{}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL + "/v1", OpenAIAPIKey: "sk-test"})
	require.NoError(t, err)

	const calls = 16
	round := func() {
		var g errgroup.Group
		for range calls {
			g.Go(func() error {
				_, err := r.Generate(context.Background(), llm.Request{Model: "openai:gpt-test", Messages: user("hello"),
					OnText: func(context.Context, string) error { return nil }})
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	round()
	first := opened.Load()
	require.LessOrEqual(t, first, int64(calls), "one connection per call in flight at most")
	round()
	round()
	require.Equal(t, first, opened.Load(), "later rounds open no new connections")
}
