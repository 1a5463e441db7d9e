package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestFallbackModels: an agent's fallback models and the error types it
// falls back on are checked when the catalog is applied, each problem at
// its file, line and field; an agent that names no types gets the
// defaults.
func TestFallbackModels(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	tests := []struct {
		name     string
		src      string
		want     []string // problems; nil for a valid catalog
		models   []string
		fallback []string
	}{
		{
			name:     "defaults",
			src:      head + "    fallback_models: [anthropic:claude-3-5-haiku-latest, 'ollama:llama3.2']\n",
			models:   []string{"anthropic:claude-3-5-haiku-latest", "ollama:llama3.2"},
			fallback: []string{agent.ErrTypeModelFailed, agent.ErrTypeUnavailable, agent.ErrTypeContextLength},
		},
		{
			name:     "named types",
			src:      head + "    fallback_models: [openai:gpt-4o]\n    fallback_on: [ContextLengthExceeded, ModelRejected]\n",
			models:   []string{"openai:gpt-4o"},
			fallback: []string{agent.ErrTypeContextLength, agent.ErrTypeModelRejected},
		},
		{
			name: "none",
			src:  head,
		},
		{
			name: "unknown provider",
			src:  head + "    fallback_models: [openai:gpt-4o, acme:big]\n",
			want: []string{`t.yaml:5: agents[0].fallback_models[1]: unknown provider "acme" (known: anthropic, ollama, openai)`},
		},
		{
			name: "malformed",
			src:  head + "    fallback_models:\n      - gpt-4o\n      - ''\n      - 'openai:'\n",
			want: []string{
				`t.yaml:6: agents[0].fallback_models[0]: "gpt-4o" is not "provider:model", e.g. "openai:gpt-4o-mini"`,
				`t.yaml:7: agents[0].fallback_models[1]: "" is not "provider:model", e.g. "openai:gpt-4o-mini"`,
				`t.yaml:8: agents[0].fallback_models[2]: "openai:" is not "provider:model", e.g. "openai:gpt-4o-mini"`,
			},
		},
		{
			name: "not a string",
			src:  head + "    fallback_models: [{model: openai:gpt-4o}]\n",
			want: []string{`t.yaml:5: agents[0].fallback_models[0]: want a string, not a mapping`},
		},
		{
			name: "duplicate",
			src:  head + "    fallback_models: [openai:gpt-4o, anthropic:claude-3-5-haiku-latest, openai:gpt-4o]\n",
			want: []string{`t.yaml:5: agents[0].fallback_models[2]: "openai:gpt-4o" is listed twice`},
		},
		{
			name: "the agent's own model",
			src:  head + "    fallback_models:\n      - openai:gpt-4o-mini\n",
			want: []string{`t.yaml:6: agents[0].fallback_models[0]: "openai:gpt-4o-mini" is the agent's own model: a fallback must be another`},
		},
		{
			name: "unknown error type",
			src:  head + "    fallback_models: [openai:gpt-4o]\n    fallback_on: [ModelFailed, TurnTimeout, model_failed]\n",
			want: []string{
				`t.yaml:6: agents[0].fallback_on[1]: "TurnTimeout" is not an error type a fallback model may fix (want one of ModelFailed, Unavailable, ContextLengthExceeded, ModelRejected)`,
				`t.yaml:6: agents[0].fallback_on[2]: "model_failed" is not an error type a fallback model may fix (want one of ModelFailed, Unavailable, ContextLengthExceeded, ModelRejected)`,
			},
		},
		{
			name: "duplicate error type",
			src:  head + "    fallback_models: [openai:gpt-4o]\n    fallback_on: [ModelFailed, ModelFailed]\n",
			want: []string{`t.yaml:6: agents[0].fallback_on[1]: "ModelFailed" is listed twice`},
		},
		{
			name: "error types without fallback models",
			src:  head + "    fallback_on: [ModelFailed]\n",
			want: []string{`t.yaml:5: agents[0].fallback_on[0]: the agent has no fallback_models to fall back on`},
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
			a := cat.Tenants[0].Agents[0]
			require.Equal(t, tt.models, a.FallbackModels)
			require.Equal(t, tt.fallback, a.FallbackOn)
		})
	}
}

// TestFallbackNextModel: a turn goes down the agent's list, one model at
// a time, only on the error types the agent names.
func TestFallbackNextModel(t *testing.T) {
	src := "tenant: demo\nagents:\n  - id: a\n    model: openai:m1\n    fallback_models: [openai:m2, anthropic:m3]\n"
	cat, err := Parse(nil, "t.yaml", []byte(src))
	require.NoError(t, err)
	a := cat.Tenants[0].Agents[0]
	for _, tt := range []struct{ model, errType, want string }{
		{"openai:m1", agent.ErrTypeModelFailed, "openai:m2"},
		{"openai:m2", agent.ErrTypeUnavailable, "anthropic:m3"},
		{"openai:m1", agent.ErrTypeContextLength, "openai:m2"},
		{"anthropic:m3", agent.ErrTypeModelFailed, ""}, // the last one
		{"openai:m1", agent.ErrTypeModelRejected, ""},  // not named
		{"openai:m1", agent.ErrTypeBudget, ""},         // never a model's
		{"openai:other", agent.ErrTypeModelFailed, ""}, // not the agent's
	} {
		require.Equal(t, tt.want, a.NextModel(tt.model, tt.errType), "%s failing %s", tt.model, tt.errType)
	}
	require.True(t, a.Calls("anthropic:m3"))
	require.False(t, a.Calls("openai:other"))
}
