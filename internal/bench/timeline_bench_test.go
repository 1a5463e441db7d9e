package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/timeline"
)

// timelineCalls is the size of the turn BenchmarkTimeline reads.
const timelineCalls = 10000

// BenchmarkTimeline reads the timeline of a turn of 10,000 tool calls
// (20,002 steps, 10,001 ledger rows), written to PostgreSQL as the worker
// writes a turn's rows, through the gateway's HTTP API: the first page
// (what the turn page loads first), a page in the middle, the last one,
// and every page at the largest page size. Each is reported in ms.
func BenchmarkTimeline(b *testing.B) {
	token := "secret-" + testserver.RandomID() + testserver.RandomID()
	ts := testserver.Start(b, testserver.Options{Script: benchScript(), Catalogs: []string{benchCatalog}, HTTPAPI: true,
		Logger: zap.NewNop(), Tokens: map[string]string{token: "demo:user+admin:bench"}})
	api := "http://" + ts.HTTPAPIAddr()
	job := "timeline-" + testserver.RandomID()
	ctx := b.Context()
	seedLongTurn(ctx, b, ts, job, timelineCalls)
	stream := "turn/demo/" + job

	get := func(after, limit int) (timeline.Timeline, time.Duration) {
		b.Helper()
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/%s/timeline?after=%d&limit=%d", api, stream, after, limit), nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(b, err)
		took := time.Since(start)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s", body)
		var tl timeline.Timeline
		require.NoError(b, json.Unmarshal(body, &tl))
		return tl, took
	}
	var first, middle, last, all time.Duration
	for b.Loop() {
		tl, took := get(-1, 200)
		first += took
		require.Len(b, tl.Items, 200)
		require.Equal(b, timelineCalls, tl.Totals.ToolCalls)
		_, took = get(timelineCalls, 200)
		middle += took
		tl, took = get(2*timelineCalls-100, 200)
		last += took
		require.Nil(b, tl.NextAfter)
		start, after, items := time.Now(), -1, 0
		for {
			tl, _ = get(after, 1000)
			items += len(tl.Items)
			if tl.NextAfter == nil {
				break
			}
			after = *tl.NextAfter
		}
		all += time.Since(start)
		require.Equal(b, 2*timelineCalls+2, items)
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Milliseconds())/n, "first-page-ms")
	b.ReportMetric(float64(middle.Milliseconds())/n, "middle-page-ms")
	b.ReportMetric(float64(last.Milliseconds())/n, "last-page-ms")
	b.ReportMetric(float64(all.Milliseconds())/n, "all-pages-ms")
}

// seedLongTurn writes a completed turn of calls calculator calls as the
// worker does: its turns row, the prompt, a model call and a tool result
// per call, the answer, a ledger row per model call and its result.
func seedLongTurn(ctx context.Context, b *testing.B, ts *testserver.Server, job string, calls int) {
	b.Helper()
	pool := ts.Store().Pool()
	exec := func(sql string, args ...any) {
		b.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(b, err, "%s", sql)
	}
	exec(`INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request, created_at)
VALUES ('demo', $1, 'turn/demo/' || $1, 'assistant', 1, jsonb_build_object('prompt', 'count to ' || $2::int, 'job_id', $1), now() - interval '1 hour')`, job, calls)
	exec(`INSERT INTO turn_steps (tenant_id, job_id, seq, message, created_at)
VALUES ('demo', $1, 0, jsonb_build_object('role', 'user', 'content', 'count to ' || $2::int), now() - interval '1 hour')`, job, calls)
	// Step 2i-1 asks for call i, step 2i answers it; step 2*calls+1 is the
	// answer.
	exec(`INSERT INTO turn_steps (tenant_id, job_id, seq, message, created_at)
SELECT 'demo', $1, 2*i - 1,
  jsonb_build_object('role', 'assistant', 'content', 'Step ' || i,
    'tool_calls', jsonb_build_array(jsonb_build_object('id', 'call_' || i, 'name', 'calculator',
      'arguments', jsonb_build_object('expression', i || '+1')::text))),
  now() - interval '1 hour' + (2*i - 1) * interval '100 ms'
FROM generate_series(1, $2::int) AS i`, job, calls)
	exec(`INSERT INTO turn_steps (tenant_id, job_id, seq, message, created_at)
SELECT 'demo', $1, 2*i, jsonb_build_object('role', 'tool', 'tool_call_id', 'call_' || i, 'name', 'calculator', 'content', (i + 1)::text),
  now() - interval '1 hour' + 2*i * interval '100 ms'
FROM generate_series(1, $2::int) AS i`, job, calls)
	exec(`INSERT INTO turn_steps (tenant_id, job_id, seq, message, created_at)
VALUES ('demo', $1, 2*$2::int + 1, jsonb_build_object('role', 'assistant', 'content', 'Counted to ' || $2::int), now())`, job, calls)
	exec(`INSERT INTO usage_ledger (tenant_id, job_id, step, attempt, agent_id, agent_version, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, created_at)
SELECT 'demo', $1, s, 1, 'assistant', 1, 'openai:gpt-4o-mini', 2300, 40, 0, 0, 0.0004, now()
FROM generate_series(1, 2*$2::int + 1, 2) AS s`, job, calls)
	exec(`INSERT INTO agent_results (tenant_id, job_id, workflow_id, agent_id, agent_version, result_data, status, completed_at)
VALUES ('demo', $1, 'turn/demo/' || $1, 'assistant', 1, '{}', 'completed', now())`, job)
}
