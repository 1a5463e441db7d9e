package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestRecordings: a selection takes its tenant's completed turns of one
// agent in the time range, oldest first, by channel and outcome when
// asked, never an evaluation's own turns nor another tenant's; a stored
// dataset is written once and read by its tenant only.
func TestRecordings(t *testing.T) {
	ctx := context.Background()
	s := open(t, store.Options{})
	now := time.Now()
	put := func(tenant, job, agentID, channel, status string, at time.Time, steps int) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, `INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request)
			VALUES ($1, $2, 'turn/' || $1 || '/' || $2, $3, 1, '{}')`, tenant, job, agentID)
		require.NoError(t, err)
		for seq := range steps {
			_, err := s.Pool().Exec(ctx, `INSERT INTO turn_steps (tenant_id, job_id, seq, message) VALUES ($1, $2, $3, '{"role":"user"}')`, tenant, job, seq)
			require.NoError(t, err)
		}
		_, err = s.Pool().Exec(ctx, `INSERT INTO agent_results (tenant_id, job_id, agent_id, status, channel, result_data, created_at)
			VALUES ($1, $2, $3, $4, $5, '{}', $6)`, tenant, job, agentID, status, channel, at)
		require.NoError(t, err)
	}
	put("demo", "j1", "calc", agent.ChannelGRPC, agent.StatusCompleted, now.Add(-30*time.Minute), 4)
	put("demo", "j2", "calc", agent.ChannelHTTP, agent.StatusFailed, now.Add(-20*time.Minute), 1)
	put("demo", "j3", "calc", agent.ChannelEval, agent.StatusCompleted, now.Add(-10*time.Minute), 1)
	put("demo", "j4", "other", agent.ChannelGRPC, agent.StatusCompleted, now.Add(-10*time.Minute), 1)
	put("demo", "j5", "calc", agent.ChannelGRPC, agent.StatusCompleted, now.Add(-48*time.Hour), 1)
	put("acme", "a1", "calc", agent.ChannelGRPC, agent.StatusCompleted, now.Add(-10*time.Minute), 1)
	// A turn an evaluation's turn (j3) delegated to, and one a live turn
	// (j1) did: only the second is a recording.
	put("demo", "j3-child", "calc", agent.ChannelDelegate, agent.StatusCompleted, now.Add(-9*time.Minute), 1)
	put("demo", "j1-child", "calc", agent.ChannelDelegate, agent.StatusCompleted, now.Add(-8*time.Minute), 1)
	for _, j := range []string{"j3", "j1"} {
		_, err := s.Pool().Exec(ctx, `UPDATE turns SET request = jsonb_build_object('parent', jsonb_build_object('workflow_id', 'turn/demo/' || $1::text))
			WHERE tenant_id = 'demo' AND job_id = $1 || '-child'`, j)
		require.NoError(t, err)
	}

	jobs := func(tenant string, sel agent.RecordSelection) []string {
		t.Helper()
		sel.AgentID, sel.From, sel.To = "calc", now.Add(-time.Hour), now
		recs, err := s.Recordings(ctx, tenant, sel)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.JobID)
		}
		return out
	}
	require.Equal(t, []string{"j1", "j2", "j1-child"}, jobs("demo", agent.RecordSelection{}))
	require.Equal(t, []string{"j1-child"}, jobs("demo", agent.RecordSelection{Channel: agent.ChannelDelegate}))
	require.Equal(t, []string{"j1"}, jobs("demo", agent.RecordSelection{Channel: agent.ChannelGRPC}))
	require.Equal(t, []string{"j2"}, jobs("demo", agent.RecordSelection{Outcome: agent.StatusFailed}))
	require.Equal(t, []string{"j1"}, jobs("demo", agent.RecordSelection{Limit: 1}))
	require.Equal(t, []string{"j1"}, jobs("demo", agent.RecordSelection{Channel: agent.ChannelGRPC, Outcome: agent.StatusCompleted}))
	require.Equal(t, []string{"a1"}, jobs("acme", agent.RecordSelection{}))
	recs, err := s.Recordings(ctx, "demo", agent.RecordSelection{AgentID: "calc", From: now.Add(-time.Hour), To: now})
	require.NoError(t, err)
	require.Equal(t, agent.Recording{JobID: "j1", WorkflowID: "turn/demo/j1", FromStep: 0, ToStep: 3}, recs[0])

	// A sample is the same subset on every call.
	for i := range 40 {
		put("demo", fmt.Sprintf("s%02d", i), "sampled", agent.ChannelGRPC, agent.StatusCompleted, now.Add(-time.Minute), 1)
	}
	sel := agent.RecordSelection{AgentID: "sampled", From: now.Add(-time.Hour), To: now, SampleRate: 0.5}
	first, err := s.Recordings(ctx, "demo", sel)
	require.NoError(t, err)
	again, err := s.Recordings(ctx, "demo", sel)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Greater(t, len(first), 5)
	require.Less(t, len(first), 35)
	for _, r := range first {
		require.True(t, agent.SampledIn(r.JobID, 0.5))
	}

	d := agent.EvalDataset{Name: "rec", Agent: "calc", Cases: []agent.EvalCase{{ID: "j1", Recording: &recs[0]}}}
	stored, err := s.PutDataset(ctx, "demo", "rec", sel, d)
	require.NoError(t, err)
	require.Equal(t, d, stored)
	other := d
	other.Description = "another"
	stored, err = s.PutDataset(ctx, "demo", "rec", sel, other)
	require.NoError(t, err)
	require.Equal(t, d, stored, "the first write stands")
	_, err = s.Dataset(ctx, "acme", "rec")
	requireCode(t, err, agent.CodeNotFound)
}
