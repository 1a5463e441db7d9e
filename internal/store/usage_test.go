package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestBilling(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()

	none, err := s.TenantBilling(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, store.Billing{}, none, "a tenant without a catalog has no prices and no budgets")

	prices := []agent.Price{{Model: "openai:m", Input: 1, Output: 4, CachedInput: 0.5}}
	budgets := &agent.Budgets{Day: &agent.Budget{Tokens: 1000}, Month: &agent.Budget{Cost: 12.5}}
	report, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Prices: prices, ReplacePrices: true, Budgets: budgets}}}, false)
	require.NoError(t, err)
	require.Equal(t, store.ActionCreated, report.Changes[0].Action)
	got, err := s.TenantBilling(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, store.Billing{Prices: prices, Budgets: *budgets}, got)

	// The same again changes nothing; no key keeps them; new ones replace them.
	report, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Prices: prices, ReplacePrices: true, Budgets: budgets}}}, false)
	require.NoError(t, err)
	require.Equal(t, store.ActionUnchanged, report.Changes[0].Action)
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo"}}}, false)
	require.NoError(t, err)
	got, err = s.TenantBilling(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, store.Billing{Prices: prices, Budgets: *budgets}, got)
	report, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		ReplacePrices: true, Budgets: &agent.Budgets{}}}}, false)
	require.NoError(t, err)
	require.Equal(t, store.ActionUpdated, report.Changes[0].Action)
	got, err = s.TenantBilling(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, store.Billing{Prices: []agent.Price{}}, got)
}

func TestPutReplyRecordsUsageOnce(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	reply := agent.Message{Role: agent.RoleAssistant, Content: "hello"}
	call := store.ModelCall{TenantID: "demo", JobID: "job-1", Step: 1, Attempt: 1, AgentID: "assistant", AgentVersion: 2,
		SessionID: "sess-1", Model: "openai:m",
		Usage: agent.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedTokens: 40, ReasoningTokens: 5}}

	requireCode(t, s.PutReply(ctx, call, reply), agent.CodeNotFound)
	require.Zero(t, count(t, s, `SELECT count(*) FROM usage_ledger`), "no turn, no row")

	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-1")))
	cost := agent.Price{Input: 1, Output: 4, CachedInput: 0.5}.Cost(call.Usage)
	call.Cost = &cost
	require.NoError(t, s.PutReply(ctx, call, reply))
	// A second attempt whose reply lost the race records nothing.
	second := call
	second.Attempt = 2
	require.NoError(t, s.PutReply(ctx, second, agent.Message{Role: agent.RoleAssistant, Content: "other"}))
	// A call of another step without a price has no cost.
	third := call
	third.Step, third.Cost = 3, nil
	require.NoError(t, s.PutReply(ctx, third, reply))

	steps, err := s.Steps(ctx, "demo", "job-1")
	require.NoError(t, err)
	require.Equal(t, "hello", steps[0].Content)
	calls, err := s.JobUsage(ctx, "demo", "job-1")
	require.NoError(t, err)
	require.Len(t, calls, 2)
	require.Equal(t, 1, calls[0].Step)
	require.Equal(t, 1, calls[0].Attempt)
	require.Equal(t, call.Usage, calls[0].Usage)
	require.NotNil(t, calls[0].Cost)
	require.InDelta(t, (60*1+40*0.5+20*4)/1e6, *calls[0].Cost, 1e-12)
	require.Nil(t, calls[1].Cost)

	other, err := s.JobUsage(ctx, "other", "job-1")
	require.NoError(t, err)
	require.Empty(t, other, "tenants see only their rows")

	spent, err := s.SpentSince(ctx, "demo", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(240), spent.Tokens)
	require.InDelta(t, cost, spent.Cost, 1e-12)
	spent, err = s.SpentSince(ctx, "demo", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, spent.Tokens)

	rows, err := s.UsageReport(ctx, "demo", time.Now().Add(-time.Hour), time.Now().Add(time.Minute), store.ByModel)
	require.NoError(t, err)
	require.Equal(t, []store.UsageRow{{Key: "openai:m", Calls: 2, InputTokens: 200, OutputTokens: 40, CachedTokens: 80,
		ReasoningTokens: 10, Cost: rows[0].Cost}}, rows)
	require.InDelta(t, cost, rows[0].Cost, 1e-12)
	rows, err = s.UsageReport(ctx, "demo", time.Now().Add(-time.Hour), time.Now().Add(time.Minute), store.ByDay)
	require.NoError(t, err)
	require.Equal(t, time.Now().UTC().Format(time.DateOnly), rows[0].Key)
	_, err = s.UsageReport(ctx, "demo", time.Now(), time.Now(), "week")
	requireCode(t, err, agent.CodeInvalid)
}
