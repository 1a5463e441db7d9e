package activities

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestCallModelLedger: a call records the provider's usage and its cost
// at the tenant's price, once, however often the activity is retried.
func TestCallModelLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	_, err := h.store.ApplyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
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
	_, err := h.store.ApplyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
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
	_, err := h.store.ApplyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
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
