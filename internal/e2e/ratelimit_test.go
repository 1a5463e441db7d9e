package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

const rateScript = `
rules:
  - name: twice
    when: {user: '(?i)^fetch twice'}
    reply: {tool_calls: [{name: fetch, arguments: '{"session_id": "r", "pipeline": [{"step": "http_request", "url": "SLOW_URL?n=1"}]}'},
                         {name: fetch, arguments: '{"session_id": "r", "pipeline": [{"step": "http_request", "url": "SLOW_URL?n=2"}]}'}]}
  - name: done
    when: {tool: '(?s).+'}
    reply: {text: 'Fetched.'}
`

const rateCatalog = `
tenant: demo
default_agent: fetcher
egress: ["SLOW_HOST"]
tools:
  - name: fetch
    kind: execute_pipeline
    rate_limit: {concurrent: 1, per_minute: 100}
agents:
  - id: fetcher
    model: openai:gpt-4o-mini
    tools: [fetch]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestToolRateLimit: two calls of a tool limited to one at a time, asked
// for together, run one after the other — the API never sees two at once
// — and the second says in the turn's stream that it waits, instead of
// failing.
func TestToolRateLimit(t *testing.T) {
	slow := startSlowAPI(t, 700*time.Millisecond)
	e := newEnvWith(t, strings.ReplaceAll(rateScript, "SLOW_URL", slow.URL))
	e.ApplyCatalog(t, strings.ReplaceAll(rateCatalog, "SLOW_HOST", strings.TrimPrefix(slow.URL, "http://")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "rate-" + testserver.RandomID(), Prompt: "fetch twice"}
	req.Normalize()
	run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(t, err)
	var res agent.TurnResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "Fetched.", res.Output)
	require.Len(t, res.Metadata.ToolCalls, 2)
	for _, c := range res.Metadata.ToolCalls {
		require.Equal(t, agent.ToolOK, c.Status)
	}
	require.EqualValues(t, 1, slow.most.Load(), "one call at a time")
	page, err := turnclient.Events(ctx, e.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	waited := false
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToolProgress && strings.Contains(ev.Tool.Message, "its calls in flight are at the limit") {
			waited = true
		}
	}
	require.True(t, waited, "the waiting call says so")
}

// rateWorkersScript: each turn asks for three calls of the limited tool at
// once.
const rateWorkersScript = `
rules:
  - name: thrice
    when: {user: '(?i)^fetch thrice'}
    reply: {tool_calls: [{name: fetch, arguments: '{"session_id": "r", "pipeline": [{"step": "http_request", "url": "SLOW_URL?n=1"}]}'},
                         {name: fetch, arguments: '{"session_id": "r", "pipeline": [{"step": "http_request", "url": "SLOW_URL?n=2"}]}'},
                         {name: fetch, arguments: '{"session_id": "r", "pipeline": [{"step": "http_request", "url": "SLOW_URL?n=3"}]}'}]}
  - name: done
    when: {tool: '(?s).+'}
    reply: {text: 'Fetched.'}
`

// TestToolRateLimitAcrossWorkers: a tool limited to two calls at once
// (and caching nothing, so that every call reaches the API),
// called by four turns of three calls each on two worker processes (each
// its own server, worker, governor and connection pool, sharing only the
// database, the task queue and the model): the API never sees more than
// two at once, it does see two, both workers run calls, and every call
// runs once and succeeds.
func TestToolRateLimitAcrossWorkers(t *testing.T) {
	slow := startSlowAPI(t, 400*time.Millisecond)
	catalog := strings.ReplaceAll(strings.ReplaceAll(rateCatalog, "SLOW_HOST", strings.TrimPrefix(slow.URL, "http://")),
		"rate_limit: {concurrent: 1, per_minute: 100}", "rate_limit: {concurrent: 2, per_minute: 100}\n    config: {cache_ttl_sec: 0}")
	dbURL := devtest.Database(t)
	first := testserver.Start(t, testserver.Options{Script: strings.ReplaceAll(rateWorkersScript, "SLOW_URL", slow.URL),
		DatabaseURL: dbURL, Catalogs: []string{catalog}})
	second := testserver.Start(t, testserver.Options{SharedModel: first.Model, DatabaseURL: dbURL, TaskQueue: first.TaskQueue})
	require.Eventually(t, func() bool { return polling(t, first.Metrics()) && polling(t, second.Metrics()) },
		time.Minute, 20*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Half the turns are started by each worker's own client: a turn
	// starts eagerly on the worker whose client starts it, and its tool
	// calls, dispatched eagerly too, run there.
	const turns = 4
	runs := make([]client.WorkflowRun, turns)
	for i := range runs {
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "rate2-" + testserver.RandomID(), Prompt: "fetch thrice"}
		var err error
		runs[i], err = turnclient.Start(ctx, []*testserver.Server{first, second}[i%2].Client(), first.TaskQueue, req)
		require.NoError(t, err)
	}
	for _, run := range runs {
		var res agent.TurnResult
		require.NoError(t, run.Get(ctx, &res))
		require.Equal(t, "Fetched.", res.Output)
		require.Len(t, res.Metadata.ToolCalls, 3)
		for _, call := range res.Metadata.ToolCalls {
			require.Equal(t, agent.ToolOK, call.Status)
		}
	}
	require.EqualValues(t, turns*3, slow.served.Load(), "each call reached the API once")
	require.EqualValues(t, 2, slow.most.Load(), "never more than two at once, and two at times")
	one, two := activityCount(t, first, "ExecuteTool"), activityCount(t, second, "ExecuteTool")
	require.EqualValues(t, turns*3, one+two)
	require.Positive(t, one, "the first worker ran no call")
	require.Positive(t, two, "the second worker ran no call")
}

// slowAPI answers every request after a delay, and counts the requests
// it served and the most it served at once.
type slowAPI struct {
	*httptest.Server
	served, inFlight, most atomic.Int32
}

func startSlowAPI(t *testing.T, delay time.Duration) *slowAPI {
	t.Helper()
	api := &slowAPI{}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		api.served.Add(1)
		n := api.inFlight.Add(1)
		defer api.inFlight.Add(-1)
		for {
			m := api.most.Load()
			if n <= m || api.most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"ok": true}]`))
	}))
	t.Cleanup(api.Close)
	return api
}

// activityCount is how many activities of a type a server's worker has
// run (the SDK's execution latency histogram's count).
func activityCount(t *testing.T, srv *testserver.Server, activityType string) uint64 {
	t.Helper()
	mfs, err := srv.Metrics().Gather()
	require.NoError(t, err)
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "temporal_activity_execution_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "activity_type" && l.GetValue() == activityType {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}
