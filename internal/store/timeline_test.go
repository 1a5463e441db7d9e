package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
)

// seedTimeline writes a turn as the worker does: the prompt, a reply
// stored by its second attempt that asks for two calls, their results
// (one an error), an approval decided twice, a delivery and its resend,
// the answer, and a prepare call's ledger row.
func seedTimeline(t *testing.T, s *store.Store, job string) {
	t.Helper()
	ctx := t.Context()
	turn := demoTurn(job)
	turn.Prompt = &agent.Message{Role: agent.RoleUser, Content: turn.Request.Prompt}
	require.NoError(t, s.BeginTurn(ctx, turn))
	cost := 0.25
	call := store.ModelCall{TenantID: "demo", JobID: job, Step: 1, Attempt: 2, AgentID: "assistant", AgentVersion: 2, Model: "openai:gpt-4o-mini",
		Usage: agent.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 40, ReasoningTokens: 5}, Cost: &cost,
		WholeFrom: 3, DigestFrom: 1, Unbudgeted: true}
	require.NoError(t, s.PutReply(ctx, call, agent.Message{Role: agent.RoleAssistant, Content: "Let me look.",
		ToolCalls: []agent.ToolCall{{ID: "call-a", Name: "send_mail", Arguments: `{"to":"ana"}`}, {ID: "call-b", Name: "calculator", Arguments: `{"expression":"1/0"}`}}}))
	require.NoError(t, s.PutStep(ctx, "demo", job, 2, agent.Message{Role: agent.RoleTool, ToolCallID: "call-a", Name: "send_mail", Content: "sent"}))
	require.NoError(t, s.PutStep(ctx, "demo", job, 3, agent.Message{Role: agent.RoleTool, ToolCallID: "call-b", Name: "calculator", Content: "error: division by zero"}))
	answer := call
	answer.Step, answer.Attempt, answer.Usage, answer.Cost, answer.WholeFrom, answer.DigestFrom = 4, 1, agent.Usage{PromptTokens: 200, CompletionTokens: 10}, nil, 0, 0
	require.NoError(t, s.PutReply(ctx, answer, agent.Message{Role: agent.RoleAssistant, Content: "Sent; 1/0 has no answer."}))
	require.NoError(t, s.PutUsage(ctx, store.ModelCall{TenantID: "demo", JobID: job, Step: 0, Attempt: 1, AgentID: "assistant", AgentVersion: 2,
		Model: "openai:gpt-4o-mini", Kind: store.KindPrepare, Usage: agent.Usage{PromptTokens: 7, CompletionTokens: 3}}))

	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, r := range []agent.ApprovalRecord{
		{ApprovalID: "ap-1", Outcome: agent.ApprovalTimedOut, Via: "timeout", RequestedAt: at, DecidedAt: at.Add(time.Minute)},
		{ApprovalID: "ap-2", Outcome: agent.ApprovalApproved, Via: "signal", Approver: "ana", Reason: "fine", RequestedAt: at, DecidedAt: at.Add(2 * time.Minute), Resend: true},
	} {
		r.TenantID, r.JobID, r.CallID, r.Tool = "demo", job, "call-a", "send_mail"
		require.NoError(t, s.RecordApproval(ctx, r))
	}
	k := effects.Key{TenantID: "demo", JobID: job, Seq: 2}
	_, ok, err := s.Intend(ctx, k, "att-1", "POST https://mail.example.com/send")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Answered(ctx, k, "att-1", 202))
	k.Resend = "ap-2"
	_, _, err = s.Intend(ctx, k, "att-2", "POST https://mail.example.com/again")
	require.NoError(t, err)
}

// TestTimelineReads: each read of a turn's timeline finds the turn's
// rows, of the range or keys asked, and nothing of another tenant's.
func TestTimelineReads(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	seedTimeline(t, s, "tl-1")

	turn, err := s.TimelineTurn(ctx, "demo", "tl-1")
	require.NoError(t, err)
	require.Equal(t, "turn/demo/tl-1", turn.WorkflowID)
	require.Equal(t, "assistant", turn.AgentID)
	require.Equal(t, 2, turn.AgentVersion)
	require.Equal(t, "sess-1", turn.SessionID)
	require.Equal(t, "What is 12.5 * 4?", turn.Request.Prompt)
	require.False(t, turn.CreatedAt.IsZero())
	require.Nil(t, turn.Outcome, "a turn without a result is running")

	steps, err := s.DatedSteps(ctx, "demo", "tl-1", 1, 3)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, []int{1, 2}, []int{steps[0].Seq, steps[1].Seq})
	require.Equal(t, "call-a", steps[1].ToolCallID)
	require.False(t, steps[1].CreatedAt.Before(steps[0].CreatedAt))

	asker, err := s.AssistantBefore(ctx, "demo", "tl-1", 4, 10)
	require.NoError(t, err)
	require.Equal(t, 1, asker.Seq)
	_, err = s.AssistantBefore(ctx, "demo", "tl-1", 1, 10)
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.AssistantBefore(ctx, "demo", "tl-1", 4, 1)
	requireCode(t, err, agent.CodeNotFound)

	calls, err := s.ChatCalls(ctx, "demo", "tl-1", 0, 100)
	require.NoError(t, err)
	require.Len(t, calls, 2, "the prepare call is no step's reply")
	require.Equal(t, 1, calls[0].Step)
	require.Equal(t, 2, calls[0].Attempt)
	require.Equal(t, 3, calls[0].WholeFrom)
	require.Equal(t, 1, calls[0].DigestFrom)
	require.Equal(t, 40, calls[0].Usage.CachedTokens)
	require.InDelta(t, 0.25, *calls[0].Cost, 1e-9)
	require.Nil(t, calls[1].Cost)

	totals, err := s.TurnTotals(ctx, "demo", "tl-1")
	require.NoError(t, err)
	require.Equal(t, store.TurnTotals{Steps: 5, MaxSeq: 4, ToolMessages: 2, ModelCalls: 2, Retries: 1,
		Usage:   agent.Usage{PromptTokens: 307, CompletionTokens: 33, TotalTokens: 340, CachedTokens: 40, ReasoningTokens: 5},
		CostUSD: 0.25, Approvals: 1}, totals)

	approvals, err := s.CallApprovals(ctx, "demo", "tl-1", []string{"call-a", "call-b"})
	require.NoError(t, err)
	require.Len(t, approvals, 1)
	require.Equal(t, "ap-2", approvals["call-a"].ApprovalID, "the latest decision is the call's")
	require.Equal(t, "ana", approvals["call-a"].Approver)

	deliveries, err := s.StepEffects(ctx, "demo", "tl-1", []int{2, 3})
	require.NoError(t, err)
	require.Len(t, deliveries, 1)
	require.True(t, deliveries[2].Delivered)
	require.Equal(t, 202, deliveries[2].Status)
	require.Equal(t, "POST https://mail.example.com/send", deliveries[2].Target, "the first delivery, not the resend")

	_, err = s.SaveResult(ctx, "demo", "turn/demo/tl-1", agent.TurnResult{Version: agent.ProtocolVersion, JobID: "tl-1",
		Status: agent.StatusFailed, Error: &agent.TurnError{Type: "ToolFailed", Message: "no"}, CompletedAt: time.Now()}, turn.Request)
	require.NoError(t, err)
	turn, err = s.TimelineTurn(ctx, "demo", "tl-1")
	require.NoError(t, err)
	require.NotNil(t, turn.Outcome)
	require.Equal(t, agent.StatusFailed, turn.Outcome.Status)
	require.Equal(t, "ToolFailed", turn.Outcome.Error.Type)
	require.False(t, turn.Outcome.EndedAt.IsZero())
}

// TestTimelineOtherTenant: another tenant's reads of the same job find
// nothing of it.
func TestTimelineOtherTenant(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	seedTimeline(t, s, "tl-2")
	for _, tc := range []struct {
		name string
		read func() (int, error)
	}{
		{"turn", func() (int, error) { _, err := s.TimelineTurn(ctx, "other", "tl-2"); return 0, err }},
		{"steps", func() (int, error) { st, err := s.DatedSteps(ctx, "other", "tl-2", 0, 100); return len(st), err }},
		{"reply", func() (int, error) { _, err := s.AssistantBefore(ctx, "other", "tl-2", 4, 10); return 0, err }},
		{"ledger", func() (int, error) { c, err := s.ChatCalls(ctx, "other", "tl-2", 0, 100); return len(c), err }},
		{"totals", func() (int, error) {
			tt, err := s.TurnTotals(ctx, "other", "tl-2")
			return tt.Steps + tt.ModelCalls + tt.Approvals, err
		}},
		{"approvals", func() (int, error) {
			a, err := s.CallApprovals(ctx, "other", "tl-2", []string{"call-a"})
			return len(a), err
		}},
		{"effects", func() (int, error) { e, err := s.StepEffects(ctx, "other", "tl-2", []int{2}); return len(e), err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.read()
			if err != nil {
				requireCode(t, err, agent.CodeNotFound)
			}
			require.Zero(t, n)
		})
	}
	_, err := s.TimelineTurn(ctx, "other", "tl-2")
	requireCode(t, err, agent.CodeNotFound)
}
