package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestSweepRetentionResumes: a SweepRetention attempt after one that
// died goes on from its last heartbeat — it skips what that one
// finished and adds to what it had counted — and an attempt that starts
// over (no heartbeat) deletes only what is left.
func TestSweepRetentionResumes(t *testing.T) {
	h := newHarness(t, modelScript)
	ctx := context.Background()
	_, err := h.applyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Retention: &agent.Retention{Results: 24 * time.Hour, Transcripts: 24 * time.Hour}}}}, false)
	require.NoError(t, err)
	_, err = h.store.Pool().Exec(ctx, `INSERT INTO agent_results (tenant_id, job_id, result_data, status, created_at)
SELECT 'demo', 'old-' || i, '{}', 'completed', now() - interval '2 days' FROM generate_series(1, 3) i`)
	require.NoError(t, err)
	_, err = h.store.Pool().Exec(ctx, `INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request, created_at)
VALUES ('demo', 'old-1', 'w', 'a', 1, '{}', now() - interval '2 days')`)
	require.NoError(t, err)
	in := contract.SweepRetentionInput{RunID: "retention/test", Now: time.Now()}

	// The attempt before had deleted 2 results, and finished the
	// transcripts; its totals carry on and transcripts are not swept again.
	env, _ := newActivityEnv(zap.NewNop())
	h.acts.Register(env)
	env.SetHeartbeatDetails(sweepProgress{
		Result:   contract.RetentionResult{Swept: []contract.RetentionSwept{{TenantID: "demo", Kind: "results", Deleted: 2}, {TenantID: "demo", Kind: "transcripts", Deleted: 4}}},
		Finished: []string{"demo/transcripts"},
	})
	val, err := env.ExecuteActivity(contract.SweepRetention, in)
	require.NoError(t, err)
	var got contract.RetentionResult
	require.NoError(t, val.Get(&got))
	require.Equal(t, []contract.RetentionSwept{{TenantID: "demo", Kind: "results", Deleted: 5}, {TenantID: "demo", Kind: "transcripts", Deleted: 4}}, got.Swept)
	var turns int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
	require.Equal(t, 1, turns, "a kind the last attempt finished is not swept again")

	// A fresh attempt deletes what is left, and nothing twice.
	val, err = h.env.ExecuteActivity(contract.SweepRetention, in)
	require.NoError(t, err)
	require.NoError(t, val.Get(&got))
	require.Equal(t, []contract.RetentionSwept{{TenantID: "demo", Kind: "transcripts", Deleted: 1}}, got.Swept)
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
	require.Zero(t, turns)
	// (A new environment: this one keeps the last attempt's heartbeat.)
	again, _ := newActivityEnv(zap.NewNop())
	h.acts.Register(again)
	val, err = again.ExecuteActivity(contract.SweepRetention, in)
	require.NoError(t, err)
	var last contract.RetentionResult
	require.NoError(t, val.Get(&last))
	require.Empty(t, last.Swept)
}
