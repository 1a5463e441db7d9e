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
	want := Spent{Tokens: 50, Cost: 0.25}
	require.NoError(t, periods[0].Exceeded("demo", Spent{Tokens: 50, Cost: 100}, Spent{}, want), "the call's reservation fills the budget")
	err := periods[0].Exceeded("demo", Spent{Tokens: 51}, Spent{}, want)
	require.True(t, IsCode(err, CodeBudget), "the call's reservation would pass the budget")
	require.EqualError(t, err, `tenant "demo" has used 51 tokens this day (UTC); its day budget is 100 tokens; this call would reserve 50 more`)
	require.EqualError(t, periods[0].Exceeded("demo", Spent{Tokens: 30}, Spent{Tokens: 21}, want),
		`tenant "demo" has used 30 tokens this day (UTC) and calls in flight reserve 21 more; its day budget is 100 tokens; this call would reserve 50 more`)
	require.NoError(t, periods[0].Exceeded("demo", Spent{Tokens: 30}, Spent{Tokens: 20}, want))
	require.Error(t, periods[0].Exceeded("demo", Spent{}, Spent{}, Spent{Tokens: 101}), "a call larger than the budget never passes")
	require.NoError(t, periods[1].Exceeded("demo", Spent{Tokens: 1e9, Cost: 2.25}, Spent{}, want))
	require.EqualError(t, periods[1].Exceeded("demo", Spent{Cost: 2.5}, Spent{}, want),
		`tenant "demo" has spent 2.5 USD this month (UTC); its month budget is 2.5 USD; this call would reserve 0.25 USD more`)
	require.EqualError(t, periods[1].Exceeded("demo", Spent{Cost: 2}, Spent{Cost: 0.5}, want),
		`tenant "demo" has spent 2 USD this month (UTC) and calls in flight reserve 0.5 USD more; its month budget is 2.5 USD; this call would reserve 0.25 USD more`)
	require.Empty(t, Budgets{}.Periods())

	c := CodeBudget.Class()
	require.Equal(t, ErrTypeBudget, c.Type)
	require.False(t, c.Retryable)
	require.True(t, c.Public)
}

func TestReserve(t *testing.T) {
	msgs := []Message{
		{Role: RoleSystem, Content: "You are terse."},                                                          // 12+6+14 = 32
		{Role: RoleUser, Content: "What is 6*7?"},                                                              // 12+4+12 = 28
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"e":"6*7"}`}}}, // 12+9+2+10+11 = 44
		{Role: RoleTool, ToolCallID: "c1", Name: "calculator", Content: "42"},                                  // 12+4+2+10+2 = 30
	}
	tools := []Tool{{Name: "calculator", Description: "Computes.", Parameters: []byte(`{"type":"object"}`)}} // 24+10+9+17 = 60
	// 194 bytes: 65 tokens at 3 bytes a token, rounded up.
	require.Equal(t, 65, PromptTokens(msgs, tools))
	require.Zero(t, PromptTokens(nil, nil))
	require.Equal(t, 4, PromptTokens([]Message{{}}, nil), "an empty message still costs its framing")

	require.Equal(t, Spent{Tokens: 165}, Reserve(65, 100, nil), "no price, no cost")
	got := Reserve(1_000_000, 500_000, &Price{Input: 2, CachedInput: 0.5, Output: 8})
	require.Equal(t, int64(1_500_000), got.Tokens)
	require.InDelta(t, 2+4, got.Cost, 1e-9, "the prompt is costed as uncached")
}
