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

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
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
	var inFlight, most atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(700 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"ok": true}]`))
	}))
	defer slow.Close()
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
	require.EqualValues(t, 1, most.Load(), "one call at a time")
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
