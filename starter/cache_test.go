package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// cacheScript answers "add A and B" with a calculator call, then the
// result; the provider reads most of each prompt from its cache. The
// plain agent's model (gpt-4o) caches nothing.
const cacheScript = `
rules:
  - name: plain
    when: {model: '^gpt-4o$'}
    reply: {text: 'Plain.', usage: {prompt_tokens: 500, completion_tokens: 5}}
  - name: add
    when: {user: 'add (\d+) and (\d+)'}
    reply:
      tool_calls: [{name: calculator, arguments: '{"expression": "$1 + $2"}'}]
      usage: {prompt_tokens: 1000, completion_tokens: 20, cached_tokens: 600}
  - name: sum
    when: {tool: '(.+)'}
    reply: {text: 'The sum is $1.', usage: {prompt_tokens: 1000, completion_tokens: 10, cached_tokens: 900}}
`

const cacheCatalog = `
tenant: demo
default_agent: cached
tools:
  - {name: calculator, kind: calculator}
  - {name: search, kind: calculator, description: 'a second tool, so that the order of the tools counts'}
agents:
  - id: cached
    model: 'openai:gpt-4o-mini'
    system_prompt: 'You add numbers with the calculator. Answer in one sentence.'
    examples:
      - {user: 'add 1 and 1', assistant: 'The sum is 2.'}
    tools: [calculator, search]
  - {id: plain, model: 'openai:gpt-4o', system_prompt: 'Be plain.'}
`

// TestPromptCache: every model call of an agent version sends the
// version's prompt_cache_key and the same prefix — the tools, byte for
// byte in the version's order, then the system prompt and the few-shot
// examples — whatever the
// turn asks and whatever varies after it (the data of earlier turns of
// the session); another agent sends another key. The hit rate the
// provider's cached tokens make shows per agent in GetUsage and in
// starter usage, and model_calls_total counts the calls by cache hit.
func TestPromptCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script:   cacheScript,
		Catalogs: []string{cacheCatalog},
		Tokens:   map[string]string{demoToken: "demo:user+admin"},
		HTTP:     true,
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	client := pb.NewAgentServiceClient(srv.Conn)
	as := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+demoToken)
	session := "s-" + newJobID()
	for _, turn := range []struct{ agentID, prompt string }{
		{"cached", "add 2 and 3"}, {"cached", "please add 40 and 2"}, {"plain", "hello"},
	} {
		res, err := client.Invoke(as, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: turn.agentID, SessionId: session, Prompt: turn.prompt}})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.GetStatus(), "%v", res.GetError())
	}

	reqs := srv.Model.Requests()
	require.Len(t, reqs, 5)
	cached, plain := reqs[:4], reqs[4]
	key := agent.PromptCacheKey("demo", "cached", 1)
	for i, r := range cached {
		require.Equal(t, key, r.PromptCacheKey, "call %d", i)
		require.Equal(t, cached[0].ToolsJSON, r.ToolsJSON, "call %d: the tools, byte for byte", i)
		require.Equal(t, []string{"calculator", "search"}, r.Tools)
		require.Equal(t, "system", r.Messages[0].Role)
		require.Equal(t, "You add numbers with the calculator. Answer in one sentence.", r.Messages[0].Content, "call %d", i)
		require.Equal(t, []scripted.Message{{Role: "user", Content: "add 1 and 1"}, {Role: "assistant", Content: "The sum is 2."}}, r.Messages[1:3],
			"call %d: the few-shot example follows the system prompt", i)
	}
	require.NotEqual(t, cached[1].Messages, cached[2].Messages, "what follows the prefix varies")
	require.Equal(t, agent.PromptCacheKey("demo", "plain", 1), plain.PromptCacheKey)
	require.NotEqual(t, key, plain.PromptCacheKey)

	cat := pb.NewCatalogServiceClient(srv.Conn)
	usage, err := cat.GetUsage(as, &pb.GetUsageRequest{SinceDuration: "1h", GroupBy: "agent"})
	require.NoError(t, err)
	rates := map[string]float64{}
	for _, r := range usage.GetRows() {
		rates[r.GetKey()] = r.GetCacheHitRate()
	}
	require.InDeltaMapValues(t, map[string]float64{"cached": 3000.0 / 4000, "plain": 0}, rates, 1e-9)
	require.InDelta(t, 3000.0/4500, usage.GetTotal().GetCacheHitRate(), 1e-9)

	out, err := starter(ctx, srv.GRPCAddr(), demoToken, "usage", "--since", "1h", "--by", "agent")
	require.NoError(t, err)
	require.Contains(t, out, "cache hits")
	require.Regexp(t, `cached\s+4\s+4000\s+3000\s+60\s+0\s+0\.000000\s+75\.0%`, out)
	require.Regexp(t, `plain\s+1\s+500\s+0\s+5\s+0\s+0\.000000\s+0\.0%`, out)
	require.Regexp(t, `total\s+5\s+4500\s+3000\s+65\s+0\s+0\.000000\s+66\.7%`, out)

	m := scrapeMetrics(t, srv.HTTPAddr())
	require.Equal(t, 4.0, m["cached/true"], "every call of cached read from the cache")
	require.Equal(t, 1.0, m["plain/false"])
}

// scrapeMetrics reads model_calls_total from a worker's /metrics, by
// "agent/cache_hit".
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, m := range fams["model_calls_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[labels["agent"]+"/"+labels["cache_hit"]] += m.GetCounter().GetValue()
	}
	return out
}
