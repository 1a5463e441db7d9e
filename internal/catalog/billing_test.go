package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestPricesAndBudgets(t *testing.T) {
	cat, err := Parse(testKinds(t), "t.yaml", []byte(`
tenant: demo
prices:
  - {model: 'openai:gpt-4o-mini', input: 0.15, output: 0.6, cached_input: 0.075}
  - {model: 'openai:o3', input: 2, output: 8}
budgets:
  day: {tokens: 100000, cost: 5}
  month: {cost: 100.5}
`))
	require.NoError(t, err)
	tc := cat.Tenants[0]
	require.True(t, tc.ReplacePrices)
	require.Equal(t, []agent.Price{
		{Model: "openai:gpt-4o-mini", Input: 0.15, Output: 0.6, CachedInput: 0.075},
		{Model: "openai:o3", Input: 2, Output: 8, CachedInput: 2}, // cached defaults to input
	}, tc.Prices)
	require.Equal(t, &agent.Budgets{Day: &agent.Budget{Tokens: 100000, Cost: 5}, Month: &agent.Budget{Cost: 100.5}}, tc.Budgets)

	none, err := Parse(testKinds(t), "t.yaml", []byte("tenant: demo\n"))
	require.NoError(t, err)
	require.False(t, none.Tenants[0].ReplacePrices, "no prices key keeps the stored table")
	require.Nil(t, none.Tenants[0].Budgets, "no budgets key keeps the stored budgets")

	cleared, err := Parse(testKinds(t), "t.yaml", []byte("tenant: demo\nprices: []\nbudgets: {}\n"))
	require.NoError(t, err)
	require.True(t, cleared.Tenants[0].ReplacePrices)
	require.Empty(t, cleared.Tenants[0].Prices)
	require.Equal(t, &agent.Budgets{}, cleared.Tenants[0].Budgets)

	tests := []struct{ name, src, want string }{
		{"unknown price key", "tenant: demo\nprices:\n  - {model: 'openai:m', input: 1, output: 2, cache: 1}\n",
			`t.yaml:3: prices[0].cache: unknown field; known fields: model, input, output, cached_input`},
		{"negative price", "tenant: demo\nprices:\n  - model: 'openai:m'\n    input: -1\n    output: 2\n",
			`t.yaml:4: prices[0].input: -1 is negative: want 0 or more USD`},
		{"non-numeric price", "tenant: demo\nprices:\n  - {model: 'openai:m', input: 1, output: cheap}\n",
			`t.yaml:3: prices[0].output: want a number of USD, not "cheap"`},
		{"missing output", "tenant: demo\nprices:\n  - {model: 'openai:m', input: 1}\n",
			`prices[0].output: is required: USD per million completion tokens`},
		{"missing model", "tenant: demo\nprices:\n  - {input: 1, output: 1}\n", `prices[0].model: is required`},
		{"model priced twice", "tenant: demo\nprices:\n  - {model: 'openai:m', input: 1, output: 1}\n  - {model: 'openai:m', input: 2, output: 2}\n",
			`t.yaml:4: prices[1].model: model "openai:m" already has a price at t.yaml:3`},
		{"prices twice", "tenant: demo\nprices: []\n---\ntenant: demo\nprices: []\n", `prices are already set for tenant "demo"`},
		{"unknown period", "tenant: demo\nbudgets: {week: {tokens: 5}}\n", `t.yaml:2: budgets.week: unknown field; known fields: day, month`},
		{"negative budget", "tenant: demo\nbudgets:\n  day: {cost: -3}\n", `t.yaml:3: budgets.day.cost: -3 is negative`},
		{"negative tokens", "tenant: demo\nbudgets:\n  month: {tokens: -3}\n", `t.yaml:3: budgets.month.tokens: -3 is negative`},
		{"empty period", "tenant: demo\nbudgets:\n  day: {}\n", `budgets.day: give tokens, cost (USD) or both`},
		{"budgets not a mapping", "tenant: demo\nbudgets: 5\n", `t.yaml:2: budgets: want a mapping with day, month`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.src)
			require.NotEmpty(t, got)
			require.Contains(t, strings.Join(got, "\n"), tt.want)
		})
	}
}
