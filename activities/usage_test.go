package activities

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
)

// TestCallModelLedger: a call records the provider's usage and its cost
// at the tenant's price, once, however often the activity is retried.
func TestCallModelLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
		Prices: []agent.Price{{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}}}}}, false)
	require.NoError(t, err)
	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")

	var first, again contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	require.Equal(t, agent.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200, CachedTokens: 400, ReasoningTokens: 50}, first.Usage)
	h.execute(t, contract.CallModel, callModelInput(job, ag), &again)
	require.True(t, again.Stored)
	require.Equal(t, first.Usage, again.Usage)

	calls, err := h.store.JobUsage(t.Context(), "demo", job)
	require.NoError(t, err)
	require.Len(t, calls, 1, "the retry found the reply stored and recorded nothing")
	c := calls[0]
	require.Equal(t, []any{1, 1, "assistant", ag.Version, "openai:gpt-4o-mini"}, []any{c.Step, c.Attempt, c.AgentID, c.AgentVersion, c.Model})
	require.Equal(t, first.Usage, c.Usage)
	require.NotNil(t, c.Cost)
	// (1000-400) × 0.15 + 400 × 0.075 + 200 × 0.6, per million tokens.
	require.InDelta(t, (600*0.15+400*0.075+200*0.6)/1e6, *c.Cost, 1e-12)
}

// TestCallModelBudget: once the tenant's daily tokens are used, a call
// fails BudgetExceeded, for good, without calling the model.
func TestCallModelBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Budgets: &agent.Budgets{Day: &agent.Budget{Tokens: 1000}}}}}, false)
	require.NoError(t, err)

	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")
	var first contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	require.Equal(t, 1, h.model.Served("priced"), "under budget: the model is called")

	job = randomJob()
	ag = h.loadAgent(t, job, "priced again")
	_, err = h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeBudget, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), `tenant "demo" has used 1200 tokens this day (UTC); its day budget is 1000 tokens`)
	require.Equal(t, 1, h.model.Served("priced"), "over budget: the model is not called")
}

// TestCallModelCostBudget: the month's cost, at the tenant's prices, is
// bounded too.
func TestCallModelCostBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
		Prices:  []agent.Price{{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}},
		Budgets: &agent.Budgets{Month: &agent.Budget{Cost: 0.0002}}}}}, false)
	require.NoError(t, err)

	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")
	var first contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)

	job = randomJob()
	ag = h.loadAgent(t, job, "priced again")
	_, err = h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeBudget, app.Type())
	require.Contains(t, app.Error(), `tenant "demo" has spent 0.00024 USD this month (UTC); its month budget is 0.0002 USD`)
	require.Equal(t, 1, h.model.Served("priced"))
}

// reserveScript answers slowly, so that a test sees the call's
// reservation held while it runs.
const reserveScript = `
rules:
  - name: rejected
    when: {user: '^rejected'}
    fault: {status: 400, times: -1, message: 'unsupported parameter: temperature'}
  - name: slow
    when: {user: '^slow'}
    reply: {text: 'At last.', delay_ms: 1500, usage: {prompt_tokens: 70, completion_tokens: 30}}
  - name: answer
    reply: {text: 'Hello there.', usage: {prompt_tokens: 70, completion_tokens: 30}}
`

// TestCallModelReservesBudget: a call of a tenant with a budget holds
// its worst case while it runs (the prompt counted, plus the 4096 output
// tokens it is then bounded to, at the model's price), and gives it back
// when its reply is stored or its call fails; a tenant without a budget
// reserves nothing and its calls are sent as the agent says.
func TestCallModelReservesBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reserveScript)
	ctx := t.Context()
	reserved := func() agent.Spent {
		sp, err := h.store.Reserved(ctx, "demo")
		require.NoError(t, err)
		return sp
	}
	call := func(prompt string) (contract.CallModelResult, agent.Agent, error) {
		job := randomJob()
		ag := h.loadAgent(t, job, prompt)
		val, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		var res contract.CallModelResult
		if err == nil {
			require.NoError(t, val.Get(&res))
		}
		return res, ag, err
	}
	lastSent := func() scripted.Request {
		reqs := h.model.Requests()
		return reqs[len(reqs)-1]
	}

	_, _, err := call("hello")
	require.NoError(t, err)
	require.Zero(t, lastSent().MaxTokens, "no budget: the provider's default")
	require.Zero(t, reserved())

	price := agent.Price{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}
	_, err = h.applyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
		Prices: []agent.Price{price}, Budgets: &agent.Budgets{Day: &agent.Budget{Tokens: 1_000_000}}}}}, false)
	require.NoError(t, err)

	job := randomJob()
	ag := h.loadAgent(t, job, "slow, please")
	done := make(chan error, 1)
	go func() {
		_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		done <- err
	}()
	var held agent.Spent
	require.Eventually(t, func() bool { held = reserved(); return held.Tokens > 0 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, <-done)
	stored, err := h.store.AgentVersion(ctx, "demo", ag.ID, ag.Version)
	require.NoError(t, err)
	prompt := agent.PromptTokens([]agent.Message{{Role: agent.RoleSystem, Content: "Be brief."}, {Role: agent.RoleUser, Content: "slow, please"}}, stored.Tools)
	require.Equal(t, agent.Reserve(prompt, agent.DefaultReservedOutputTokens, &price).Tokens, held.Tokens)
	require.InDelta(t, agent.Reserve(prompt, agent.DefaultReservedOutputTokens, &price).Cost, held.Cost, 1e-9)
	require.Equal(t, agent.DefaultReservedOutputTokens, lastSent().MaxTokens, "the call is bounded to what it reserved")
	require.Zero(t, reserved(), "settled when the reply was stored")

	_, _, err = call("rejected, this one")
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeModelRejected, app.Type())
	require.Zero(t, reserved(), "released when the call failed")
}
