package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestChannelKept: a turn's channel is kept with its result and with
// each of its model calls in the usage ledger, and usage splits by it.
func TestChannelKept(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	for i, ch := range []string{agent.ChannelA2A, agent.ChannelOpenAI, agent.ChannelOpenAI} {
		job := "job-ch-" + string(rune('a'+i))
		require.NoError(t, s.BeginTurn(ctx, demoTurn(job)))
		for step := 1; step <= 2; step++ {
			require.NoError(t, s.PutReply(ctx, store.ModelCall{TenantID: "demo", JobID: job, Step: step, Attempt: 1, AgentID: "assistant",
				AgentVersion: 2, Model: "openai:m", Channel: ch, Usage: agent.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}},
				agent.Message{Role: agent.RoleAssistant, Content: "hi"}))
		}
		req := demoTurn(job).Request
		req.Channel = ch
		saved, err := s.SaveResult(ctx, "demo", "turn/demo/"+job, completed(job, "hi"), req)
		require.NoError(t, err)
		require.Equal(t, ch, saved.Channel, "the stored result says where the turn came from")
		calls, err := s.JobUsage(ctx, "demo", job)
		require.NoError(t, err)
		require.Len(t, calls, 2)
		require.Equal(t, ch, calls[0].Channel)
	}
	// A judge's call is its turn's too.
	require.NoError(t, s.PutUsage(ctx, store.ModelCall{TenantID: "demo", JobID: "job-ch-a:judge:1", Step: 1, Attempt: 1, AgentID: "assistant",
		Model: "openai:m", Channel: agent.ChannelA2A, Usage: agent.Usage{PromptTokens: 5}}))

	rows, err := s.UsageReport(ctx, "demo", time.Now().Add(-time.Hour), time.Now().Add(time.Minute), store.ByChannel)
	require.NoError(t, err)
	require.Equal(t, []store.UsageRow{
		{Key: agent.ChannelA2A, Calls: 3, InputTokens: 25, OutputTokens: 2},
		{Key: agent.ChannelOpenAI, Calls: 4, InputTokens: 40, OutputTokens: 4},
	}, rows)

	// A result stored before channels were kept has none.
	old, err := s.SaveResult(ctx, "demo", "turn/demo/job-ch-old", completed("job-ch-old", "hi"), agent.TurnRequest{TenantID: "demo", JobID: "job-ch-old", Prompt: "x"})
	require.NoError(t, err)
	require.Empty(t, old.Channel)
}
