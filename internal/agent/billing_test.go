package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPriceCost(t *testing.T) {
	p := Price{Model: "openai:m", Input: 2, CachedInput: 0.5, Output: 8}
	u := Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000, CachedTokens: 400_000, ReasoningTokens: 100_000}
	// 600k uncached at 2, 400k cached at 0.5, 500k output (reasoning
	// included) at 8.
	require.InDelta(t, 1.2+0.2+4, p.Cost(u), 1e-9)
	require.Zero(t, p.Cost(Usage{}))
	// More cached tokens than prompt tokens are counted as the prompt.
	require.InDelta(t, 0.5+8, p.Cost(Usage{PromptTokens: 1_000_000, CachedTokens: 2_000_000, CompletionTokens: 1_000_000}), 1e-9)

	got, ok := PriceOf([]Price{p}, "openai:m")
	require.True(t, ok)
	require.Equal(t, p, got)
	_, ok = PriceOf([]Price{p}, "openai:other")
	require.False(t, ok)
}

func TestBudgets(t *testing.T) {
	at := time.Date(2026, 11, 23, 22, 30, 0, 0, time.FixedZone("X", -5*3600)) // 2026-11-24 03:30 UTC
	require.Equal(t, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), PeriodStart(PeriodDay, at))
	require.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), PeriodStart(PeriodMonth, at))

	b := Budgets{Day: &Budget{Tokens: 100}, Month: &Budget{Cost: 2.5}}
	periods := b.Periods()
	require.Len(t, periods, 2)
	require.NoError(t, periods[0].Exceeded("demo", Spent{Tokens: 99, Cost: 100}))
	err := periods[0].Exceeded("demo", Spent{Tokens: 100})
	require.True(t, IsCode(err, CodeBudget))
	require.EqualError(t, err, `tenant "demo" has used 100 tokens this day (UTC); its day budget is 100 tokens`)
	require.NoError(t, periods[1].Exceeded("demo", Spent{Tokens: 1e9, Cost: 2.4999}))
	require.EqualError(t, periods[1].Exceeded("demo", Spent{Cost: 2.5}), `tenant "demo" has spent 2.5 USD this month (UTC); its month budget is 2.5 USD`)
	require.Empty(t, Budgets{}.Periods())

	c := CodeBudget.Class()
	require.Equal(t, ErrTypeBudget, c.Type)
	require.False(t, c.Retryable)
	require.True(t, c.Public)
}
