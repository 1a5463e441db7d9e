package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestRecordApproval(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	first := agent.ApprovalRecord{
		TenantID: "demo", JobID: "job-a", CallID: "c1", Tool: "restart_service", Args: json.RawMessage(`{"name":"api"}`),
		Outcome: agent.ApprovalRejected, Reason: "not during the sale", Approver: "ana", Via: "update",
		RequestedAt: at, DecidedAt: at.Add(time.Minute),
	}
	require.NoError(t, s.RecordApproval(ctx, first))
	retry := first
	retry.Outcome, retry.Approver = agent.ApprovalApproved, "bob"
	require.NoError(t, s.RecordApproval(ctx, retry), "a retry is a no-op")
	second := first
	second.CallID, second.Outcome, second.Reason, second.Via = "c2", agent.ApprovalTimedOut, "", "timeout"
	second.DecidedAt = at.Add(time.Hour)
	require.NoError(t, s.RecordApproval(ctx, second))

	got, err := s.Approvals(ctx, "demo", "job-a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "ana", got[0].Approver, "the first decision stands")
	require.Equal(t, agent.ApprovalRejected, got[0].Outcome)
	require.JSONEq(t, `{"name":"api"}`, string(got[0].Args))
	require.True(t, got[0].DecidedAt.Equal(at.Add(time.Minute)))
	require.Equal(t, agent.ApprovalTimedOut, got[1].Outcome)

	other, err := s.Approvals(ctx, "other", "job-a")
	require.NoError(t, err)
	require.Empty(t, other, "tenants do not see each other's approvals")

	bad := first
	bad.Outcome = "maybe"
	require.True(t, agent.IsCode(s.RecordApproval(ctx, bad), agent.CodeInvalid))
	bad = first
	bad.Args = json.RawMessage(`{`)
	require.True(t, agent.IsCode(s.RecordApproval(ctx, bad), agent.CodeInvalid))
}
