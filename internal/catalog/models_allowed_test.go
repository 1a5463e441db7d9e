package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestModelsAllowed: the models a turn may name instead of its agent's
// are checked when the catalog is applied, each problem at its line; a
// turn naming one of them, or the agent's own, is allowed, another is
// refused PermissionDenied with what the agent allows.
func TestModelsAllowed(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	tests := []struct {
		name    string
		src     string
		want    []string // problems; nil for a valid catalog
		allowed []string
	}{
		{name: "none", src: head},
		{
			name:    "two",
			src:     head + "    models_allowed: [openai:gpt-4o, 'anthropic:claude-3-5-haiku-latest']\n",
			allowed: []string{"openai:gpt-4o", "anthropic:claude-3-5-haiku-latest"},
		},
		{
			name: "unknown provider",
			src:  head + "    models_allowed: [acme:big]\n",
			want: []string{`t.yaml:5: agents[0].models_allowed[0]: unknown provider "acme" (known: anthropic, ollama, openai)`},
		},
		{
			name: "malformed",
			src:  head + "    models_allowed: [gpt-4o]\n",
			want: []string{`t.yaml:5: agents[0].models_allowed[0]: "gpt-4o" is not "provider:model", e.g. "openai:gpt-4o-mini"`},
		},
		{
			name: "duplicate",
			src:  head + "    models_allowed: [openai:gpt-4o, openai:gpt-4o]\n",
			want: []string{`t.yaml:5: agents[0].models_allowed[1]: "openai:gpt-4o" is listed twice`},
		},
		{
			name: "the agent's own model",
			src:  head + "    models_allowed: [openai:gpt-4o-mini]\n",
			want: []string{`t.yaml:5: agents[0].models_allowed[0]: "openai:gpt-4o-mini" is the agent's own model, which a turn may always name: list only the others`},
		},
		{
			name: "not a list",
			src:  head + "    models_allowed: openai:gpt-4o\n",
			want: []string{`t.yaml:5: agents[0].models_allowed: want a list, not "openai:gpt-4o"`},
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
			require.Equal(t, tt.allowed, cat.Tenants[0].Agents[0].ModelsAllowed)
		})
	}

	cat, err := Parse(nil, "t.yaml", []byte(head+"    models_allowed: [openai:gpt-4o]\n"))
	require.NoError(t, err)
	a := cat.Tenants[0].Agents[0]
	require.NoError(t, a.CheckModel(""))
	require.NoError(t, a.CheckModel("openai:gpt-4o-mini"))
	require.NoError(t, a.CheckModel("openai:gpt-4o"))
	require.True(t, a.Calls("openai:gpt-4o"))
	err = a.CheckModel("openai:o3")
	require.True(t, agent.IsCode(err, agent.CodePermissionDenied), "%v", err)
	require.EqualError(t, err, `model "openai:o3": agent "a" lets a turn choose only openai:gpt-4o (models_allowed) or its own openai:gpt-4o-mini`)

	cat, err = Parse(nil, "t.yaml", []byte(head))
	require.NoError(t, err)
	err = cat.Tenants[0].Agents[0].CheckModel("openai:gpt-4o")
	require.True(t, agent.IsCode(err, agent.CodePermissionDenied), "%v", err)
	require.ErrorContains(t, err, `agent "a" does not let a turn choose its model (it runs on openai:gpt-4o-mini; list the models a turn may name under models_allowed)`)
}
