package llm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestUsageOf reads usage in the names langchaingo v0.1.14's clients set.
func TestUsageOf(t *testing.T) {
	tests := []struct {
		name string
		info map[string]any
		want agent.Usage
		ok   bool
	}{
		{"openai", map[string]any{"PromptTokens": 100, "CompletionTokens": 20, "TotalTokens": 120,
			"PromptCachedTokens": 60, "CompletionReasoningTokens": 8, "ReasoningTokens": 8},
			agent.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedTokens: 60, ReasoningTokens: 8}, true},
		{"openai without details", map[string]any{"PromptTokens": 10, "CompletionTokens": 2, "TotalTokens": 12},
			agent.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}, true},
		// Anthropic's input_tokens leaves out cache reads and writes.
		{"anthropic", map[string]any{"InputTokens": 30, "OutputTokens": 5, "CacheCreationInputTokens": 20, "CacheReadInputTokens": 50},
			agent.Usage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105, CachedTokens: 50}, true},
		{"none", map[string]any{"ThinkingContent": ""}, agent.Usage{}, false},
		{"nil", nil, agent.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := usageOf(tt.info)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
