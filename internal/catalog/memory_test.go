package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// TestMemory: an agent's memory is checked when the catalog is applied —
// a window of at least agent.MinWindowTokens, a summary model of a known
// provider — and kept.
func TestMemory(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	tests := []struct {
		name string
		src  string
		want []string // problems; nil for a valid catalog
		out  agent.Memory
	}{
		{name: "none", src: head},
		{name: "both", src: head + "    memory: {window_tokens: 4000, summary_model: 'anthropic:claude-3-5-haiku-latest'}\n",
			out: agent.Memory{WindowTokens: 4000, SummaryModel: "anthropic:claude-3-5-haiku-latest"}},
		{name: "a window too small", src: head + "    memory: {window_tokens: 50}\n",
			want: []string{`t.yaml:5: agents[0].memory.window_tokens: 50 is too small: a memory window is at least 200 tokens`}},
		{name: "an unknown provider", src: head + "    memory: {summary_model: 'acme:big'}\n",
			want: []string{`t.yaml:5: agents[0].memory.summary_model: unknown provider "acme" (known: anthropic, ollama, openai)`}},
		{name: "an unknown key", src: head + "    memory: {window: 4000}\n",
			want: []string{`t.yaml:5: agents[0].memory.window: unknown field; known fields: window_tokens, summary_model, recall, top_k, budget, extract`}},
		{name: "long-term memory", src: head + "    memory: {recall: true, top_k: 8, budget: 300, extract: true}\n",
			out: agent.Memory{Recall: true, TopK: 8, Budget: 300, Extract: true}},
		{name: "too many recalled", src: head + "    memory: {recall: true, top_k: 51}\n",
			want: []string{`t.yaml:5: agents[0].memory.top_k: 51 is too large: an agent recalls at most 50 memories`}},
		{name: "a budget too large", src: head + "    memory: {budget: 9000}\n",
			want: []string{`t.yaml:5: agents[0].memory.budget: 9000 is too large: recalled memories take at most 8000 tokens`}},
		{name: "recall not a boolean", src: head + "    memory: {recall: 'yes'}\n",
			want: []string{`t.yaml:5: agents[0].memory.recall: want true or false, not "yes"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				require.Equal(t, tt.want, problems(t, tt.src))
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.Equal(t, tt.out, cat.Tenants[0].Agents[0].Memory)
			window := tt.out.WindowTokens
			if window == 0 {
				window = agent.DefaultWindowTokens
			}
			require.Equal(t, window, cat.Tenants[0].Agents[0].Memory.Window())
		})
	}
}

// TestReadmeLongTermMemoryCatalog: the catalog of the "Long-term memory"
// section of docs/concepts/conversations.md loads, with its tools and
// memory options.
func TestReadmeLongTermMemoryCatalog(t *testing.T) {
	block := docYAML(t, "concepts/conversations.md", "Long-term memory")
	kinds, err := tools.NewRegistry(tools.Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	c, err := Parse(kinds, "conversations.md", []byte(block))
	require.NoError(t, err, block)
	ag := c.Tenants[0].Agents[0]
	require.Equal(t, agent.Memory{SummaryModel: "openai:gpt-4o-mini", Extract: true, Recall: true, TopK: 5, Budget: 500}, ag.Memory)
	var names []string
	for _, tool := range ag.Tools {
		names = append(names, tool.Kind)
	}
	require.Equal(t, []string{"remember", "recall"}, names)
}
