package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// usageScript reports usage with prompt tokens read from the provider's
// cache and reasoning tokens.
const usageScript = `
rules:
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply:
      tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]
      usage: {prompt_tokens: 800, completion_tokens: 60, cached_tokens: 500, reasoning_tokens: 30}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.', usage: {prompt_tokens: 900, completion_tokens: 10, cached_tokens: 700}}
`

// TestBudgetTurns: a turn whose model calls read cached prompt tokens
// reports them; once that turn has used so much of the tenant's daily
// tokens that a call's worst case (its prompt and 4096 output tokens)
// no longer fits, the next turn fails BudgetExceeded without calling the
// model. Both
// histories replay, and are recorded as budget_turn and budget_exceeded.
func TestBudgetTurns(t *testing.T) {
	tp, spans := newTracing(t)
	srv := testserver.Start(t, testserver.Options{Script: usageScript, HTTP: true, TracerProvider: tp,
		Catalogs: []string{testCatalog + "prices:\n  - {model: 'openai:gpt-4o-mini', input: 0.15, output: 0.6}\nbudgets:\n  day: {tokens: 5500}\n"}})
	e := &env{Server: srv, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(job, prompt string) (agent.TurnResult, string, error) {
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", JobID: job, Prompt: prompt})
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		return res, run.GetID(), err
	}

	res, id, err := start("calc-"+testserver.RandomID(), "What is 6*7?")
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.Output)
	require.True(t, res.Metadata.CacheHit)
	require.Equal(t, 1200, res.Metadata.CachedTokens)
	require.Equal(t, 1770, res.Metadata.TokensUsed)
	e.replay(id, "budget_turn")

	// The provider's cached and reasoning tokens reach the chat spans and
	// model_tokens_total.
	var cached []int64
	for _, sp := range named(spans.await("RunActivity:CallModel"), "chat gpt-4o-mini") {
		cached = append(cached, attrs(sp)["gen_ai.usage.cache_read.input_tokens"].AsInt64())
	}
	require.ElementsMatch(t, []int64{500, 700}, cached)
	m := scrape(t, srv.HTTPAddr())
	for kind, want := range map[string]float64{"input": 1700, "output": 70, "cached": 1200, "reasoning": 30} {
		require.Equal(t, want, m.sum("model_tokens_total", map[string]string{"tenant": "demo", "kind": kind}), kind)
	}

	served := len(srv.Model.Requests())
	job := "over-" + testserver.RandomID()
	res, id, err = start(job, "What is 1+1?")
	require.NoError(t, err, "a failed turn's result is its answer")
	require.Equal(t, agent.StatusFailed, res.Status)
	require.Equal(t, agent.ErrTypeBudget, res.Error.Type)
	require.False(t, res.Error.Retryable)
	require.Equal(t, served, len(srv.Model.Requests()), "no model call over the budget")
	stored, err := srv.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, agent.StatusFailed, stored.Status)
	require.Equal(t, agent.ErrTypeBudget, stored.Error.Type)
	require.Contains(t, stored.Error.Message, `tenant "demo" has used 1770 tokens this day (UTC); its day budget is 5500 tokens`)
	m = scrape(t, srv.HTTPAddr())
	require.Equal(t, 1.0, m.sum("turns_total", map[string]string{"tenant": "demo", "status": agent.StatusFailed}))
	require.Equal(t, 1770.0, m.sum("model_tokens_total", map[string]string{"tenant": "demo", "kind": "input"})+
		m.sum("model_tokens_total", map[string]string{"tenant": "demo", "kind": "output"}), "the refused turn called no model")
	e.replay(id, "budget_exceeded")
}

// concurrentBudgetCatalog bounds the demo tenant to 1000 tokens a day and
// its agent's calls to 100 output tokens; concurrentBudgetScript answers
// each call with 100 tokens, slowly, so that the turns' calls are in
// flight together. One after the other, ten calls fit the budget.
const (
	concurrentBudgetCatalog = `
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Answer in one line.
    limits: {max_iterations: 2, turn_timeout_sec: 60, max_output_tokens: 100}
budgets:
  day: {tokens: 1000}
`
	concurrentBudgetScript = `
rules:
  - name: answer
    reply: {text: 'Done.', delay_ms: 400, usage: {prompt_tokens: 60, completion_tokens: 40}}
`
)

// TestBudgetConcurrentTurns: twenty turns started at once against a
// budget that allows ten calls make at most ten calls at the model, and
// spend no more than the budget (each reserves its worst case before it
// is sent, checked one at a time against what the others hold); the turns that were refused fail
// BudgetExceeded and say what was used, reserved and allowed.
func TestBudgetConcurrentTurns(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Script: concurrentBudgetScript, Catalogs: []string{concurrentBudgetCatalog}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const turns = 20
	runs := make([]client.WorkflowRun, turns)
	for i := range runs {
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", JobID: fmt.Sprintf("burst-%d-%s", i, testserver.RandomID()), Prompt: "Say done."})
		require.NoError(t, err)
		runs[i] = run
	}
	completed, refused := 0, 0
	for _, run := range runs {
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err, "a failed turn's result is its answer")
		if res.Status == agent.StatusCompleted {
			completed++
			require.Equal(t, "Done.", res.Output)
			continue
		}
		refused++
		require.Equal(t, agent.StatusFailed, res.Status)
		require.NotNil(t, res.Error)
		require.Equal(t, agent.ErrTypeBudget, res.Error.Type, res.Error.Message)
		require.Regexp(t, `^tenant "demo" has used \d+ tokens this day \(UTC\)( and calls in flight reserve \d+ more)?; its day budget is 1000 tokens; this call would reserve \d+ more$`, res.Error.Message)
	}

	sent := srv.Model.Requests()
	require.LessOrEqual(t, len(sent), 10, "no call over the budget")
	require.Equal(t, completed, len(sent), "a completed turn made one call, a refused one none")
	require.Equal(t, turns, completed+refused)
	require.Positive(t, refused)
	for _, r := range sent {
		require.Equal(t, 100, r.MaxTokens, "the call is bounded to what it reserved")
	}
	spent, err := srv.Store().SpentSince(ctx, "demo", agent.PeriodStart(agent.PeriodDay, time.Now()))
	require.NoError(t, err)
	require.Equal(t, int64(100*completed), spent.Tokens)
	require.LessOrEqual(t, spent.Tokens, int64(1000), "the ledger within the budget")
	held, err := srv.Store().Reserved(ctx, "demo")
	require.NoError(t, err)
	require.Zero(t, held, "every reservation settled or released")
}
