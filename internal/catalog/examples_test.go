package catalog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestExamples: an agent's few-shot examples are checked when the
// catalog is applied — both sides of each written, a bounded number —
// and kept in their order.
func TestExamples(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	many := "    examples:\n" + strings.Repeat("      - {user: q, assistant: a}\n", agent.MaxExamples+1)
	tests := []struct {
		name string
		src  string
		want []string // problems; nil for a valid catalog
		out  []agent.Example
	}{
		{name: "none", src: head},
		{
			name: "two",
			src:  head + "    examples:\n      - {user: 'What is 2+2?', assistant: '4.'}\n      - user: Add 1 and 1.\n        assistant: '2.'\n",
			out:  []agent.Example{{User: "What is 2+2?", Assistant: "4."}, {User: "Add 1 and 1.", Assistant: "2."}},
		},
		{
			name: "a side missing",
			src:  head + "    examples:\n      - {user: 'What is 2+2?'}\n      - {user: ' ', assistant: '2.'}\n",
			want: []string{
				`t.yaml:6: agents[0].examples[0].assistant: is required: an example is what a user asked and what the assistant answered`,
				`t.yaml:7: agents[0].examples[1].user: is required: an example is what a user asked and what the assistant answered`,
			},
		},
		{
			name: "unknown key",
			src:  head + "    examples:\n      - {user: q, assistant: a, system: s}\n",
			want: []string{`t.yaml:6: agents[0].examples[0].system: unknown field; known fields: user, assistant`},
		},
		{
			name: "too many",
			src:  head + many,
			want: []string{fmt.Sprintf("t.yaml:%d: agents[0].examples[%d].user: the agent has %d examples; the limit is %d", 6+agent.MaxExamples, agent.MaxExamples, agent.MaxExamples+1, agent.MaxExamples)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				require.Equal(t, tt.want, problems(t, tt.src))
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.Equal(t, tt.out, cat.Tenants[0].Agents[0].Examples)
		})
	}
}
