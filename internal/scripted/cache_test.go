package scripted

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
)

// message is a user message whose text in the cache's prompt is exactly
// 128 bytes (four blocks of 8 tokens below): its role, its content of 120
// bytes, and the separators of the two fields it leaves empty.
func message(fill string) Message {
	return Message{Role: "user", Content: strings.Repeat(fill, 120/len(fill))}
}

func openAIRequest(key string, msgs ...Message) Request {
	return Request{API: APIOpenAI, Model: "m", Messages: msgs, hints: cacheHints{key: key}}
}

// TestPromptCacheUse: a request reads from the cache the whole blocks at
// the start of its prompt that an earlier request of its key and model
// sent, and writes the rest; short prompts and short hits count nothing;
// Anthropic caches up to its last breakpoint only.
func TestPromptCacheUse(t *testing.T) {
	a, b, c := message("a"), message("b"), message("c")
	almostA := message("a")
	almostA.Content = almostA.Content[:60] + strings.Repeat("z", 60) // shares its first two blocks
	withBreakpoint := a
	withBreakpoint.CacheControl = true
	anthropicRequest := func(msgs ...Message) Request {
		return Request{API: APIAnthropic, Model: "m", Messages: msgs}
	}
	cache := newPromptCache(PromptCache{MinTokens: 32, BlockTokens: 8, MaxBlocks: 1000})
	steps := []struct {
		name                    string
		req                     Request
		prompt, cached, written int
	}{
		{"a cold cache", openAIRequest("k", a), 32, 0, 32},
		{"the prompt before, and more", openAIRequest("k", a, b), 64, 32, 32},
		{"the prompt before, and more again", openAIRequest("k", a, b, c), 96, 64, 32},
		{"another key has a cache of its own", openAIRequest("other", a, b), 64, 0, 64},
		{"another model has a cache of its own", Request{API: APIOpenAI, Model: "n", Messages: []Message{a, b}, hints: cacheHints{key: "k"}}, 64, 0, 64},
		{"a changed first message shares nothing", openAIRequest("k", c, b), 64, 0, 64},
		{"a partial last block is neither read nor written", openAIRequest("k", a, Message{Role: "user", Content: "hi"}), 35, 32, 0},
		{"a hit shorter than min_tokens counts nothing", openAIRequest("k", almostA, b), 64, 0, 64},
		{"a prompt shorter than min_tokens is not cached", openAIRequest("k", Message{Role: "user", Content: "hi"}), 3, 0, 0},
		{"Anthropic without a breakpoint caches nothing", anthropicRequest(a, b), 64, 0, 0},
		{"Anthropic writes up to its breakpoint", anthropicRequest(withBreakpoint, b), 64, 0, 32},
		{"and reads it back", anthropicRequest(withBreakpoint, c), 64, 32, 0},
	}
	for _, st := range steps {
		u := cache.use(st.req)
		require.Equal(t, cacheUse{prompt: st.prompt, cached: st.cached, written: st.written}, u, st.name)
	}
}

// TestPromptCacheBounded: the cache keeps at most max_blocks blocks, and
// forgets the least recently used first.
func TestPromptCacheBounded(t *testing.T) {
	a, b, c := message("a"), message("b"), message("c")
	cache := newPromptCache(PromptCache{MinTokens: 8, BlockTokens: 8, MaxBlocks: 8})
	for _, m := range []Message{a, b, a, c} { // c pushes out b, the least recently used
		cache.use(openAIRequest("k", m))
		require.LessOrEqual(t, len(cache.blocks), 8)
		require.Equal(t, len(cache.blocks), cache.recent.Len())
	}
	require.Equal(t, 32, cache.use(openAIRequest("k", a)).cached)
	require.Equal(t, 0, cache.use(openAIRequest("k", b)).cached)
	require.Equal(t, 0, cache.use(openAIRequest("k", c)).cached, "b pushed out c")
}

// loopScript counts with the calculator: the first call asks for 0 + 1,
// each result n below the bound for n + 1, and the bound is answered.
const loopScript = `
prompt_cache: {min_tokens: 64, block_tokens: 16}
rules:
  - name: step
    when: {tool: '^(?P<n>[0-9]+)$', below: {n: 6}}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "${n} + 1"}'}]}
  - name: done
    when: {tool: '^(?P<n>[0-9]+)$'}
    reply: {text: 'Counted to ${n}.'}
  - name: first
    when: {user: '(?i)^count'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "0 + 1"}'}]}
`

// calculate answers the loop's calculator calls: "n + 1".
func calculate(t *testing.T, args string) string {
	t.Helper()
	var n int
	_, err := fmt.Sscanf(args, `{"expression": "%d + 1"}`, &n)
	require.NoError(t, err, args)
	return strconv.Itoa(n + 1)
}

// TestLoopThroughOpenAIClient: OpenAI's Go client runs the loop script to
// its end, one tool call per step, and reads the cached part of each
// prompt from prompt_tokens_details: a request reads what the one before
// it sent under its prompt_cache_key, and another key reads nothing.
func TestLoopThroughOpenAIClient(t *testing.T) {
	script, err := Parse([]byte(loopScript))
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []Request
	srv, err := Start("127.0.0.1:0", script, Options{OnRequest: func(r Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("test-key"), option.WithMaxRetries(0))

	params := openai.ChatCompletionNewParams{Model: "scripted", PromptCacheKey: openai.String("key-1"),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You count with the calculator. " + strings.Repeat("Count one step at a time. ", 10)),
			openai.UserMessage("Count to 6."),
		}}
	var prompts, cached []int64
	for range 10 {
		resp, err := client.Chat.Completions.New(t.Context(), params)
		require.NoError(t, err)
		prompts = append(prompts, resp.Usage.PromptTokens)
		cached = append(cached, resp.Usage.PromptTokensDetails.CachedTokens)
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			require.Equal(t, "Counted to 6.", msg.Content)
			break
		}
		params.Messages = append(params.Messages, msg.ToParam(),
			openai.ToolMessage(calculate(t, msg.ToolCalls[0].Function.Arguments), msg.ToolCalls[0].ID))
	}
	require.Len(t, prompts, 7, "six calls and the answer")
	require.Zero(t, cached[0], "a cold cache")
	for i := 1; i < len(prompts); i++ {
		require.Zero(t, cached[i]%16, "whole blocks")
		require.GreaterOrEqual(t, cached[i], prompts[i-1]-16, "request %d reads all the blocks the one before it sent", i)
		require.Less(t, cached[i], prompts[i])
	}
	mu.Lock()
	require.Len(t, seen, 7)
	for i, r := range seen {
		require.Equal(t, prompts[i], int64(r.PromptTokens))
		require.Equal(t, cached[i], int64(r.CachedTokens))
		require.Positive(t, r.Bytes)
		require.Equal(t, http.StatusOK, r.Status)
	}
	mu.Unlock()

	params.PromptCacheKey = openai.String("key-2")
	resp, err := client.Chat.Completions.New(t.Context(), params)
	require.NoError(t, err)
	require.Zero(t, resp.Usage.PromptTokensDetails.CachedTokens, "another key")
}

// TestPromptCacheThroughAnthropicSDK: with cache_control on the system
// prompt, as internal/llm sends it, Anthropic's SDK reads the cache's
// write on the first call and its read on the next, and the rest of the
// prompt as input_tokens; without a breakpoint nothing is cached.
func TestPromptCacheThroughAnthropicSDK(t *testing.T) {
	srv := start(t, loopScript)
	c := anthropicClient(srv)
	system := "You count with the calculator. " + strings.Repeat("Count one step at a time. ", 20)
	params := userParams(anthropic.NewTextBlock("Count to 6."))
	params.Tools = calculatorTool()
	for _, breakpoint := range []bool{false, true} {
		params.System = []anthropic.TextBlockParam{{Text: system}}
		if breakpoint {
			params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		var usages []anthropic.Usage
		for _, stream := range []bool{false, true} {
			m, err := ask(t, c, params, stream)
			require.NoError(t, err)
			usages = append(usages, m.Usage)
		}
		first, second := usages[0], usages[1]
		if !breakpoint {
			require.Zero(t, first.CacheCreationInputTokens+first.CacheReadInputTokens+second.CacheCreationInputTokens+second.CacheReadInputTokens)
			continue
		}
		require.Positive(t, first.CacheCreationInputTokens, "the first call writes the tools and the system prompt")
		require.Zero(t, first.CacheReadInputTokens)
		require.Equal(t, first.CacheCreationInputTokens, second.CacheReadInputTokens, "the next reads them")
		require.Zero(t, second.CacheCreationInputTokens)
		require.Positive(t, second.InputTokens, "the messages after the breakpoint are not cached")
		require.Equal(t, first.InputTokens+first.CacheCreationInputTokens, second.InputTokens+second.CacheReadInputTokens,
			"the same prompt, counted in parts")
	}
	reqs := srv.Requests()
	require.Equal(t, http.StatusOK, reqs[len(reqs)-1].Status)
}
