package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
)

// withNote is user(s) with a second system message after the stable
// one, as a turn's note about its data is.
func withNote(note, s string) []agent.Message {
	msgs := user(s)
	return append(msgs[:1:1], agent.Message{Role: agent.RoleSystem, Content: note}, msgs[1])
}

// TestPromptCacheKey: a request with a cache key sends it to OpenAI as
// prompt_cache_key, and the same tools byte for byte whatever follows
// them; a request without one, or to Ollama, sends none.
func TestPromptCacheKey(t *testing.T) {
	srv, r := start(t)
	ctx := context.Background()
	for _, prompt := range []string{"hello", "something else"} {
		_, err := r.Generate(ctx, llm.Request{Model: "openai:m", Messages: withNote("data: "+prompt, prompt),
			Tools: []agent.Tool{calculator, {Name: "search"}}, CacheKey: "agentflow-abc"})
		require.NoError(t, err)
	}
	_, err := r.Generate(ctx, llm.Request{Model: "openai:m", Messages: user("hello")})
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, []string{"agentflow-abc", "agentflow-abc", ""}, []string{reqs[0].PromptCacheKey, reqs[1].PromptCacheKey, reqs[2].PromptCacheKey})
	require.NotEmpty(t, reqs[0].ToolsJSON)
	require.Equal(t, reqs[0].ToolsJSON, reqs[1].ToolsJSON)
	require.Equal(t, reqs[0].Messages[0], reqs[1].Messages[0], "the system prompt comes first, unchanged")
	require.NotEqual(t, reqs[0].Messages[1], reqs[1].Messages[1], "what varies comes after it")
	require.Nil(t, reqs[0].Temperature, "the provider's default temperature still applies")

	ollama, err := llm.New(llm.Config{OllamaHost: strings.TrimSuffix(srv.URL(), "/v1")})
	require.NoError(t, err)
	_, err = ollama.Generate(ctx, llm.Request{Model: "ollama:llama3.2", Messages: user("hello"), CacheKey: "agentflow-abc"})
	require.NoError(t, err)
	require.Empty(t, srv.Requests()[3].PromptCacheKey, "an OpenAI-compatible server other than OpenAI gets no key")
}

// anthropicReply is a non-streamed Messages API answer.
const anthropicReply = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn",
"usage":{"input_tokens":40,"output_tokens":2,"cache_read_input_tokens":1200,"cache_creation_input_tokens":0}}`

// TestAnthropicCacheControl: with a cache key, an Anthropic request's
// last tool and the stable part of its system prompt (the first system
// message, before what follows it) carry cache_control breakpoints;
// without one nothing does. The
// cached tokens the API reports come back in the usage.
func TestAnthropicCacheControl(t *testing.T) {
	r, recorded := anthropicRecorder(t, anthropicReply)
	ctx := context.Background()
	tools := []agent.Tool{calculator, {Name: "search"}}

	resp, err := r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Messages: withNote("Data you can use: cas://x", "hi"),
		Tools: tools, CacheKey: "agentflow-abc"})
	require.NoError(t, err)
	require.Equal(t, "Hello.", resp.Message.Content)
	require.Equal(t, 1200, resp.Usage.CachedTokens)
	_, err = r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Messages: user("hi"), Tools: tools, CacheKey: "agentflow-abc"})
	require.NoError(t, err)
	_, err = r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Messages: withNote("Data you can use: cas://x", "hi"), Tools: tools})
	require.NoError(t, err)
	bodies := recorded()
	require.Len(t, bodies, 3)

	require.JSONEq(t, `[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Data you can use: cas://x"}]`,
		string(bodies[0]["system"]), "the stable part is marked, what varies follows unmarked")
	var sent []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(bodies[0]["tools"], &sent))
	require.Len(t, sent, 2)
	require.NotContains(t, sent[0], "cache_control")
	require.JSONEq(t, `{"type":"ephemeral"}`, string(sent[1]["cache_control"]), "the breakpoint follows the last tool")
	require.NotContains(t, bodies[0], "prompt_cache_key", "OpenAI's field is not Anthropic's")

	require.JSONEq(t, `[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`, string(bodies[1]["system"]))

	require.JSONEq(t, `[{"type":"text","text":"be brief"},{"type":"text","text":"Data you can use: cas://x"}]`,
		string(bodies[2]["system"]), "no key: no breakpoint")
	require.NotContains(t, string(bodies[2]["tools"]), "cache_control")
}
