package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestTurnList: a tenant's turns, newest first (ties by job id), with
// their status ("running" without a result), channel, prompt and sums
// from the ledger and the steps; each filter keeps what it says, a
// cursor walks the pages, and another tenant's turns never show.
func TestTurnList(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	base := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	cost := 0.25
	type turn struct {
		tenant, job, agent, session, channel, status string
		at                                           time.Duration
		calls                                        int // model calls, each 10 in and 2 out at cost
		tools                                        int // tool messages among the steps
	}
	turns := []turn{
		{"demo", "j1", "assistant", "s1", agent.ChannelHTTP, agent.StatusCompleted, 0, 2, 1},
		{"demo", "j2", "writer", "", agent.ChannelA2A, "", time.Minute, 1, 2},
		{"demo", "j3", "assistant", "s1", agent.ChannelHTTP, agent.StatusFailed, 2 * time.Minute, 0, 0},
		{"demo", "j4", "assistant", "", agent.ChannelRetry, agent.StatusCompleted, 2 * time.Minute, 4, 0},
		{"demo", "af:telegram:1:j5", "assistant", "", agent.ChannelTelegram, agent.StatusCompleted, 3 * time.Minute, 0, 0},
		{"other", "j6", "assistant", "", agent.ChannelHTTP, agent.StatusCompleted, 4 * time.Minute, 0, 0},
	}
	for _, tt := range turns {
		req := agent.TurnRequest{Version: agent.ProtocolVersion, JobID: tt.job, TenantID: tt.tenant, AgentID: tt.agent,
			SessionID: tt.session, Prompt: "prompt of " + tt.job, Channel: tt.channel}
		require.NoError(t, s.BeginTurn(ctx, store.Turn{TenantID: tt.tenant, JobID: tt.job, WorkflowID: "turn/" + tt.tenant + "/" + tt.job,
			AgentID: tt.agent, AgentVersion: 1, SessionID: tt.session, Request: req}))
		_, err := s.Pool().Exec(ctx, `UPDATE turns SET created_at = $3 WHERE tenant_id = $1 AND job_id = $2`, tt.tenant, tt.job, base.Add(tt.at))
		require.NoError(t, err)
		for i := range tt.calls {
			require.NoError(t, s.PutUsage(ctx, store.ModelCall{TenantID: tt.tenant, JobID: tt.job, Step: i + 1, Attempt: 1, AgentID: tt.agent,
				AgentVersion: 1, Model: "openai:m", Usage: agent.Usage{PromptTokens: 10, CompletionTokens: 2}, Cost: &cost}))
		}
		for i := range tt.tools {
			require.NoError(t, s.PutStep(ctx, tt.tenant, tt.job, 10+i, agent.Message{Role: agent.RoleTool, ToolCallID: fmt.Sprint("c", i), Content: "r"}))
		}
		if tt.status != "" {
			res := completed(tt.job, "done")
			res.Status, res.CompletedAt = tt.status, base.Add(tt.at+time.Second)
			if tt.status == agent.StatusFailed {
				res.Error = &agent.TurnError{Type: "ModelError", Message: "boom"}
			}
			_, err := s.SaveResult(ctx, tt.tenant, "turn/"+tt.tenant+"/"+tt.job, res, req)
			require.NoError(t, err)
		}
	}

	list := func(f store.TurnFilter) []string {
		t.Helper()
		f.TenantID = "demo"
		if f.Limit == 0 {
			f.Limit = 50
		}
		rows, err := s.TurnList(ctx, f)
		require.NoError(t, err)
		jobs := []string{}
		for _, r := range rows {
			jobs = append(jobs, r.JobID)
		}
		return jobs
	}
	for _, tc := range []struct {
		name string
		f    store.TurnFilter
		want []string
	}{
		{"all, newest first, ties by job id", store.TurnFilter{}, []string{"af:telegram:1:j5", "j4", "j3", "j2", "j1"}},
		{"agent", store.TurnFilter{AgentID: "writer"}, []string{"j2"}},
		{"running", store.TurnFilter{Status: store.StatusRunning}, []string{"j2"}},
		{"failed", store.TurnFilter{Status: agent.StatusFailed}, []string{"j3"}},
		{"channel", store.TurnFilter{Channel: agent.ChannelHTTP}, []string{"j3", "j1"}},
		{"session", store.TurnFilter{SessionID: "s1"}, []string{"j3", "j1"}},
		{"since and until", store.TurnFilter{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute)}, []string{"j4", "j3", "j2"}},
		{"min cost", store.TurnFilter{MinCost: 0.5}, []string{"j4", "j1"}},
		{"a person's left out", store.TurnFilter{HideJobPrefixes: agent.PersonIDPrefixes()}, []string{"j4", "j3", "j2", "j1"}},
		{"after a cursor", store.TurnFilter{Before: &store.TurnCursor{CreatedAt: base.Add(2 * time.Minute), JobID: "j4"}}, []string{"j3", "j2", "j1"}},
		{"page", store.TurnFilter{Limit: 2}, []string{"af:telegram:1:j5", "j4"}},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, list(tc.f)) })
	}

	rows, err := s.TurnList(ctx, store.TurnFilter{TenantID: "demo", AgentID: "assistant", SessionID: "s1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	j1 := rows[1]
	require.Equal(t, store.TurnRow{JobID: "j1", WorkflowID: "turn/demo/j1", AgentID: "assistant", AgentVersion: 1, SessionID: "s1",
		Channel: agent.ChannelHTTP, Status: agent.StatusCompleted, Prompt: "prompt of j1", StartedAt: j1.StartedAt, EndedAt: j1.EndedAt,
		ModelCalls: 2, InputTokens: 20, OutputTokens: 4, CostUSD: 0.5, ToolCalls: 1}, j1)
	require.True(t, j1.StartedAt.Equal(base))
	require.NotNil(t, j1.EndedAt)
	rows, err = s.TurnList(ctx, store.TurnFilter{TenantID: "demo", Status: store.StatusRunning, Limit: 1})
	require.NoError(t, err)
	require.Nil(t, rows[0].EndedAt)
	require.Equal(t, 2, rows[0].ToolCalls)

	for _, bad := range []store.TurnFilter{{TenantID: "demo"}, {TenantID: "demo", Limit: store.MaxTurnRows + 1}, {Limit: 1}} {
		_, err := s.TurnList(ctx, bad)
		requireCode(t, err, agent.CodeInvalid)
	}
}

// TestForks: a fork records its origin, which lists it; a fork before a
// turn that left no exchange in its session (it failed) starts with what
// the session had when that turn began.
func TestForks(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	exchange := func(n int) []agent.Message {
		return []agent.Message{{Role: agent.RoleUser, Content: fmt.Sprintf("question %d", n)}, {Role: agent.RoleAssistant, Content: fmt.Sprintf("answer %d", n)}}
	}
	for n := 1; n <= 2; n++ {
		require.NoError(t, s.AppendSession(ctx, "demo", "orig", fmt.Sprintf("orig-%d", n), exchange(n)))
	}
	failed := demoTurn("orig-failed")
	failed.SessionID, failed.Request.SessionID, failed.Request.Prompt = "orig", "orig", "the failed one"
	require.NoError(t, s.BeginTurn(ctx, failed))
	require.NoError(t, s.AppendSession(ctx, "demo", "orig", "orig-3", exchange(3)))
	_, err := s.Pool().Exec(ctx, `UPDATE session_messages SET created_at = now() + interval '1 minute' WHERE tenant_id = 'demo' AND job_id = 'orig-3'`)
	require.NoError(t, err)

	none, err := s.Forks(ctx, "demo", "orig")
	require.NoError(t, err)
	require.Empty(t, none)

	n, _, err := s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "orig", To: "at-2", JobID: "orig-2", Before: true})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, prompt, err := s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "orig", To: "at-failed", JobID: "orig-failed", Before: true})
	require.NoError(t, err)
	require.Equal(t, 4, n, "the two exchanges before the failed turn began")
	require.Equal(t, "the failed one", prompt)
	_, _, err = s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "orig", To: "through-failed", JobID: "orig-failed"})
	requireCode(t, err, agent.CodeNotFound)
	_, _, err = s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "other", To: "x", JobID: "orig-failed", Before: true})
	requireCode(t, err, agent.CodeNotFound)

	forks, err := s.Forks(ctx, "demo", "orig")
	require.NoError(t, err)
	require.Len(t, forks, 2)
	got := map[string]string{}
	for _, f := range forks {
		require.False(t, f.CreatedAt.IsZero())
		got[f.SessionID] = f.ForkedAtJob
	}
	require.Equal(t, map[string]string{"at-2": "orig-2", "at-failed": "orig-failed"}, got)
	theirs, err := s.Forks(ctx, "acme", "orig")
	require.NoError(t, err)
	require.Empty(t, theirs, "another tenant's session has none")
	_, err = s.Forks(ctx, "demo", "")
	requireCode(t, err, agent.CodeInvalid)
}
