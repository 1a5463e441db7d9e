package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestThinking: an agent's thinking is an effort or a budget Anthropic
// takes, checked when the catalog is applied, each problem at its line.
func TestThinking(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: anthropic:claude-sonnet-4-5\n"
	tests := []struct {
		name string
		src  string
		want []string // problems; nil for a valid catalog
		th   *agent.Thinking
	}{
		{name: "none", src: head},
		{name: "effort", src: head + "    thinking: {effort: medium}\n", th: &agent.Thinking{Effort: "medium"}},
		{name: "budget", src: head + "    thinking: {budget_tokens: 8000}\n", th: &agent.Thinking{BudgetTokens: 8000}},
		{name: "unknown effort", src: head + "    thinking: {effort: extreme}\n",
			want: []string{`t.yaml:5: agents[0].thinking.effort: effort "extreme": want one of low, medium, high`}},
		{name: "small budget", src: head + "    thinking: {budget_tokens: 100}\n",
			want: []string{`t.yaml:5: agents[0].thinking.budget_tokens: 100 is too small: a thinking budget is at least 1024 tokens`}},
		{name: "empty", src: head + "    thinking: {}\n",
			want: []string{`t.yaml:5: agents[0].thinking.effort: is required: one of low, medium, high (or give budget_tokens instead)`}},
		{name: "unknown member", src: head + "    thinking: {level: high}\n",
			want: []string{`t.yaml:5: agents[0].thinking.level: unknown field; known fields: effort, budget_tokens`,
				`t.yaml:5: agents[0].thinking.effort: is required: one of low, medium, high (or give budget_tokens instead)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				require.Equal(t, tt.want, problems(t, tt.src))
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.Equal(t, tt.th, cat.Tenants[0].Agents[0].Thinking)
		})
	}
}
