package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestRetentionCommand: retention run sweeps now and prints what it
// deleted; retention audit prints the audit log's rows of it.
func TestRetentionCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := devtest.Database(t)
	ts := testserver.Start(t, testserver.Options{Script: "rules:\n  - when: {user: '.*'}\n    reply: {text: ok}\n", DatabaseURL: db,
		Catalogs: []string{"tenant: demo\nretention: {results: 1d}\n"}})
	_, err := ts.Store().Pool().Exec(ctx, `INSERT INTO agent_results (tenant_id, job_id, result_data, status, created_at)
VALUES ('demo', 'old-job', '{}', 'completed', now() - interval '2 days'), ('demo', 'new-job', '{}', 'completed', now())`)
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"retention", "run", "--address", ts.Address, "--namespace", ts.Namespace, "--task-queue", ts.TaskQueue}, &out))
	require.Regexp(t, `sweep retention/\S+-now-\S+\nTENANT +KIND +DELETED +BLOBS FREED +OBJECTS\ndemo +results +1 +0 +0\n$`, out.String())

	out.Reset()
	require.NoError(t, run(ctx, []string{"retention", "audit", "--database-url", db, "--tenant", "demo"}, &out))
	require.Regexp(t, `^AT +RUN +TENANT +KIND +COUNT +FREED +DIGEST +FIRST REFS\n\S+ +retention/\S+ +demo +results +1 +0 +[0-9a-f]{12} +old-job\n$`, out.String())
	require.NotContains(t, out.String(), "new-job")

	err = run(ctx, []string{"retention", "audit", "--database-url", ""}, &out)
	require.ErrorContains(t, err, "want --database-url")
	err = run(ctx, []string{"retention", "sweep"}, &out)
	require.ErrorContains(t, err, "want run or audit")
}
