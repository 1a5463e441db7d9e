package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAgentForTurn(t *testing.T) {
	full := func() Agent {
		return Agent{
			TenantID: "demo", ID: "support", Version: 3, Description: "answers support questions",
			Model: "openai:gpt-4o-mini", FallbackModels: []string{"anthropic:claude-haiku"}, FallbackOn: []string{ErrTypeModelFailed},
			ModelsAllowed: []string{"openai:gpt-4o"}, SystemPrompt: "You are a support agent.",
			Examples: []Example{{User: "hi", Assistant: "hello"}},
			Tools: []Tool{
				{Name: "refund", Kind: "http", Description: "refund an order", Parameters: json.RawMessage(`{"type":"object"}`),
					Approval: ApprovalAlways, Config: json.RawMessage(`{"url":"https://shop.example/refund"}`), Execution: ToolLocal,
					Source: "shop.refund", FromToolkit: "shop", RateLimit: &ToolRateLimit{PerMinute: 5}},
			},
			Limits:       Limits{MaxIterations: 4, TurnTimeoutSec: 60},
			OutputSchema: json.RawMessage(`{"type":"object"}`),
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`),
			Guardrails: []Guardrail{
				{Output: &OutputGuard{Deny: []string{"secret"}}},
				{ToolLimits: &ToolLimits{PerTurn: 3, PerTool: map[string]int{"refund": 1}}},
			},
			OnBusy:         "interrupt",
			ModelExecution: ModelLocal,
		}
	}
	tests := []struct {
		name  string
		agent func() Agent
		want  func() Agent
	}{
		{"keeps what the turn reads", full, func() Agent {
			a := full()
			a.Description, a.SystemPrompt, a.Examples, a.OutputSchema, a.InputSchema = "", "", nil, nil, nil
			a.Tools[0].Description, a.Tools[0].Parameters = "", nil
			a.Guardrails = []Guardrail{{ToolLimits: &ToolLimits{PerTurn: 3, PerTool: map[string]int{"refund": 1}}}}
			return a
		}},
		{"no tool limits, no guardrails", func() Agent {
			a := full()
			a.Guardrails = a.Guardrails[:1]
			return a
		}, func() Agent {
			a := full()
			a.Description, a.SystemPrompt, a.Examples, a.OutputSchema, a.InputSchema, a.Guardrails = "", "", nil, nil, nil, nil
			a.Tools[0].Description, a.Tools[0].Parameters = "", nil
			return a
		}},
		{"no tools", func() Agent {
			return Agent{ID: "bare", Version: 1, Model: "openai:gpt-4o-mini", SystemPrompt: "be brief"}
		},
			func() Agent { return Agent{ID: "bare", Version: 1, Model: "openai:gpt-4o-mini"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.agent()
			got := a.ForTurn()
			require.Equal(t, tt.want(), got)
			require.Equal(t, tt.agent(), a, "the agent itself is left whole")
			// What the turn asks of its agent answers the same.
			require.Equal(t, a.ToolLimits(), got.ToolLimits())
			require.Equal(t, a.NextModel(a.Model, ErrTypeModelFailed), got.NextModel(got.Model, ErrTypeModelFailed))
			for _, tool := range a.Tools {
				kept, ok := got.Tool(tool.Name)
				require.True(t, ok)
				require.Equal(t, tool.Kind, kept.Kind)
				require.Equal(t, tool.Config, kept.Config)
				require.Equal(t, tool.IsLocal(), kept.IsLocal())
				require.Equal(t, tool.Entry(), kept.Entry())
			}
		})
	}
}
