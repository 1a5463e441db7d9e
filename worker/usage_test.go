package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
// reports them; once that turn has used the tenant's daily tokens, the
// next turn fails BudgetExceeded without calling the model. Both
// histories replay, and are recorded as budget_turn and budget_exceeded.
func TestBudgetTurns(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Script: usageScript,
		Catalogs: []string{testCatalog + "prices:\n  - {model: 'openai:gpt-4o-mini', input: 0.15, output: 0.6}\nbudgets:\n  day: {tokens: 1500}\n"}})
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

	res, id, err := start("calc-"+randomID(), "What is 6*7?")
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.Output)
	require.True(t, res.Metadata.CacheHit)
	require.Equal(t, 1200, res.Metadata.CachedTokens)
	require.Equal(t, 1770, res.Metadata.TokensUsed)
	e.replay(id, "budget_turn")

	served := len(srv.Model.Requests())
	job := "over-" + randomID()
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
	require.Contains(t, stored.Error.Message, `tenant "demo" has used 1770 tokens this day (UTC); its day budget is 1500 tokens`)
	e.replay(id, "budget_exceeded")
}
