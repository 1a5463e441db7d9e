package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestRetentionSchedule: the worker keeps a schedule of the Retention
// sweep; a run of it deletes what the tenant's catalog has narrowed the
// operator's TTLs to, and only that, with the audit log's record of it.
func TestRetentionSchedule(t *testing.T) {
	month := 30 * 24 * time.Hour
	bucket := devtest.ObjectStore(t)
	ts := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{testCatalog}, ObjectStoreConfig: bucket,
		Retention: agent.Retention{Blobs: month, Results: month, Transcripts: month}})
	e := &env{Server: ts, t: t}
	ctx := t.Context()
	st := ts.Store()
	// demo narrows every TTL to a day through its catalog; other keeps the
	// operator's month.
	ts.ApplyCatalog(t, "tenant: demo\nretention: {blobs: 1d, results: 1d, transcripts: 1d}\n", "tenant: other\n")

	big := bytes.Repeat([]byte("x"), 2<<20)
	sql := func(q string, args ...any) {
		_, err := st.Pool().Exec(ctx, q, args...)
		require.NoError(t, err)
	}
	for _, tenant := range []string{"demo", "other"} {
		_, err := st.PutTenantBlob(ctx, tenant, append([]byte(tenant), big...), "")
		require.NoError(t, err)
		sql(`INSERT INTO agent_results (tenant_id, job_id, result_data, status) VALUES ($1, 'old', '{}', 'completed')`, tenant)
		sql(`INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request) VALUES ($1, 'old', 'w', 'a', 1, '{}')`, tenant)
		require.NoError(t, st.AppendSession(ctx, tenant, "s", "old", []agent.Message{{Role: agent.RoleUser, Content: "hello"}}))
	}
	for _, table := range []string{"blob_owners", "agent_results", "turns", "session_messages"} {
		sql(`UPDATE ` + table + ` SET created_at = now() - interval '3 days'`)
	}
	var demoKey string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT b.object_key FROM cas_blobs b JOIN blob_owners o USING (sha256) WHERE o.tenant_id = 'demo'`).Scan(&demoKey))

	// The worker made the schedule; a run of it now.
	h := ts.Client().ScheduleClient().GetHandle(ctx, contract.RetentionScheduleID(ts.TaskQueue))
	// A describe is a query of the scheduler's workflow on the server's
	// system worker, which a loaded server may not answer in its deadline.
	var desc *client.ScheduleDescription
	require.Eventually(t, func() bool {
		var err error
		desc, err = h.Describe(ctx)
		return err == nil
	}, 2*time.Minute, 500*time.Millisecond)
	require.Equal(t, time.Hour, desc.Schedule.Spec.Intervals[0].Every)
	require.NoError(t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))
	var wid string
	require.Eventually(t, func() bool {
		d, err := h.Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		wid = d.Info.RecentActions[0].StartWorkflowResult.WorkflowID
		return true
	}, 2*time.Minute, 100*time.Millisecond)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res contract.RetentionResult
	require.NoError(t, ts.Client().GetWorkflow(wctx, wid, "").Get(wctx, &res))
	require.ElementsMatch(t, []contract.RetentionSwept{
		{TenantID: "demo", Kind: "results", Deleted: 1},
		{TenantID: "demo", Kind: "blobs", Deleted: 1, Freed: 1, Objects: 1},
		{TenantID: "demo", Kind: "transcripts", Deleted: 2},
	}, res.Swept)

	count := func(q string) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, q).Scan(&n))
		return n
	}
	for _, table := range []string{"blob_owners", "agent_results", "turns", "session_messages"} {
		require.Zero(t, count(`SELECT count(*) FROM `+table+` WHERE tenant_id = 'demo'`), table)
		require.Equal(t, 1, count(`SELECT count(*) FROM `+table+` WHERE tenant_id = 'other'`), table)
	}
	objects, err := objstore.New(ctx, bucket)
	require.NoError(t, err)
	_, err = objects.Stat(ctx, demoKey)
	require.ErrorIs(t, err, objstore.ErrNotFound)

	log, err := st.AuditLog(ctx, store.AuditQuery{RunID: wid})
	require.NoError(t, err)
	counts := map[store.RetentionKind]int{}
	for _, a := range log {
		require.Equal(t, "demo", a.TenantID)
		counts[a.Kind] += a.Count
	}
	require.Equal(t, map[store.RetentionKind]int{store.RetainResults: 1, store.RetainBlobs: 1, store.RetainTranscripts: 2}, counts)
	e.replay(wid, "retention_sweep")
}
