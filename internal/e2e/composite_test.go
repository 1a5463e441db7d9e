package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// compositeScript fetches flights with execute_pipeline, calls the tool
// a repeated pipeline became, and searches the tenant's tools.
const compositeScript = `
pacing: {chunk_words: 8, delay_ms: 1}
rules:
  - name: flights-top
    when: {user: '(?i)^flights from (?P<origin>[A-Z]{3}) to (?P<dest>[A-Z]{3}) top (?P<k>[0-9]+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/search", "params": {"origin": "${origin}", "dest": "${dest}"}}, {"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": ${k}}]}'
  - name: saved
    when: {user: '(?i)^use the saved tool for (?P<origin>[A-Z]{3}) to (?P<dest>[A-Z]{3}) top (?P<k>[0-9]+)$'}
    reply:
      tool_calls:
        - name: search_sorted_top
          arguments: '{"origin": "${origin}", "dest": "${dest}", "k": ${k}}'
  - name: find
    when: {user: '(?i)^find a tool for (.+)$'}
    reply: {tool_calls: [{name: search_tools, arguments: '{"query": "$1"}'}]}
  - name: promoted-answer
    when: {tool: '(?s)a table of (?P<rows>[0-9]+) rows?.*saved as the tool (?P<name>[a-z0-9_]+).*?"airline":"(?P<airline>[^"]*)".*?"price":(?P<price>[0-9]+)'}
    reply: {text: 'Found ${rows} flights; the first is ${airline} at $$${price}. Saved as ${name}.'}
  - name: data-answer
    when: {tool: '(?s)a table of (?P<rows>[0-9]+) rows?.*?"airline":"(?P<airline>[^"]*)".*?"price":(?P<price>[0-9]+)'}
    reply: {text: 'Found ${rows} flights; the first is ${airline} at $$${price}.'}
  - name: search-answer
    when: {tool: '(?s)^(.*tools? match.*)$'}
    reply: {text: 'Search: $1'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
`

const compositeCatalog = `
tenant: demo
default_agent: data
egress: ["API"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config:
      credentials: [{host: "API", header: X-Api-Key, secret: "env:TEST_FLIGHTS_KEY"}]
  - name: search_tools
    kind: search_tools
agents:
  - id: data
    model: openai:gpt-4o-mini
    tools: [execute_pipeline, search_tools, composites]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
`

// TestAutoPromotion is seed 004 Phase 4 on the real stack: the second run
// of a pipeline of one shape makes it a composite tool of the tenant (one,
// not two), granted to the agent in a new version; a third turn calls it
// by name with just its arguments, and search_tools finds it.
func TestAutoPromotion(t *testing.T) {
	key := "flights-key-" + testserver.RandomID()
	t.Setenv("TEST_FLIGHTS_KEY", key)
	api := startFlights(t, key)
	host := strings.TrimPrefix(api.URL, "http://")
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(compositeScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(compositeCatalog, "API", host)},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	e := &dataEnv{env: &env{Server: srv, t: t}, api: api, key: key}
	ctx := context.Background()
	composites := func() int {
		return count(t, srv, `SELECT count(*) FROM tools t JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name
			AND v.version = t.active_version WHERE t.tenant_id = 'demo' AND v.kind = 'composite_pipeline'`)
	}

	nyc := cheapest("NYC", "LAX")
	res, _ := e.run(agent.TurnRequest{JobID: "p1-" + testserver.RandomID(), Prompt: "flights from NYC to LAX top 3"})
	require.Equal(t, fmt.Sprintf("Found 3 flights; the first is %s at $%d.", nyc[0].Airline, nyc[0].Price), res.Output)
	require.Equal(t, 1, res.Metadata.AgentVersion)
	require.Zero(t, composites())

	sfo := cheapest("SFO", "SEA")
	res, _ = e.run(agent.TurnRequest{JobID: "p2-" + testserver.RandomID(), Prompt: "flights from SFO to SEA top 5"})
	require.Equal(t, fmt.Sprintf("Found 5 flights; the first is %s at $%d. Saved as search_sorted_top.", sfo[0].Airline, sfo[0].Price), res.Output)
	require.Equal(t, 1, res.Metadata.AgentVersion, "the turn that promoted keeps its version")
	require.Equal(t, 1, composites())

	ag, err := srv.Store().ActiveAgent(ctx, "demo", "data")
	require.NoError(t, err)
	require.Equal(t, 2, ag.Version)
	tool, ok := ag.Tool("search_sorted_top")
	require.True(t, ok, "granted to the agent that takes composites")
	require.JSONEq(t, `{"type":"object","additionalProperties":false,"required":["dest","origin","k"],"properties":{
		"dest":{"type":"string","description":"the \"dest\" parameter of the request to `+api.URL+`/search; e.g. \"SEA\""},
		"origin":{"type":"string","description":"the \"origin\" parameter of the request to `+api.URL+`/search; e.g. \"SFO\""},
		"k":{"type":"integer","description":"how many rows to keep; e.g. 5"}}}`, string(tool.Parameters))

	// The third turn calls it by name, with the API key the pipeline had.
	bos := cheapest("BOS", "MIA")
	res, _ = e.run(agent.TurnRequest{JobID: "p3-" + testserver.RandomID(), Prompt: "use the saved tool for BOS to MIA top 2"})
	require.Equal(t, fmt.Sprintf("Found 2 flights; the first is %s at $%d.", bos[0].Airline, bos[0].Price), res.Output)
	require.Equal(t, 2, res.Metadata.AgentVersion)
	require.Equal(t, "search_sorted_top", res.Metadata.ToolCalls[0].Tool)
	require.EqualValues(t, 3, api.searches.Load())

	// Another run of the shape makes no second composite.
	e.run(agent.TurnRequest{JobID: "p4-" + testserver.RandomID(), Prompt: "flights from LAX to NYC top 1"})
	require.Equal(t, 1, composites())

	res, _ = e.run(agent.TurnRequest{JobID: "p5-" + testserver.RandomID(), Prompt: "find a tool for cheap flights sorted by price"})
	require.Contains(t, res.Output, "search_sorted_top (composite_pipeline; you can call it): A saved pipeline: GET "+api.URL+"/search with dest, origin; then sort by price asc; then keep the first k.")
	require.Contains(t, res.Output, "Arguments: dest, origin, k.")
}

// count runs a SELECT count(*) on the server's database.
func count(t *testing.T, srv *testserver.Server, query string) int {
	t.Helper()
	var n int
	require.NoError(t, srv.Store().Pool().QueryRow(context.Background(), query).Scan(&n))
	return n
}

// ordersScript orders an item with a POST pipeline, and calls the tool the
// repeated pipeline became.
const ordersScript = `
pacing: {chunk_words: 8, delay_ms: 1}
rules:
  - name: order
    when: {user: '(?i)^order (?P<item>[a-z]+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "method": "POST", "url": "API/orders", "params": {"item": "${item}"}}]}'
  - name: saved
    when: {user: '(?i)^order again (?P<item>[a-z]+)$'}
    reply: {tool_calls: [{name: orders, arguments: '{"item": "${item}"}'}]}
  - name: answer
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'Done.'}
`

const ordersCatalog = `
tenant: demo
default_agent: buyer
egress: ["API"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config:
      cache_ttl_sec: 0
      credentials: [{host: "API", header: X-Api-Key, secret: "env:TEST_ORDERS_KEY"}]
agents:
  - id: buyer
    model: openai:gpt-4o-mini
    tools: [execute_pipeline, composites]
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 120}
`

// TestPromotedCompositeNeedsApproval: approval follows the effect. A
// pipeline that POSTs waits for a person (execute_pipeline's default
// policy); approved twice, it is promoted into a composite; the
// composite's call POSTs with the tool's credential, so it waits too: the
// API sees nothing until the decision, and the decision is stored.
func TestPromotedCompositeNeedsApproval(t *testing.T) {
	key := "orders-key-" + testserver.RandomID()
	t.Setenv("TEST_ORDERS_KEY", key)
	var posts atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/orders" || r.Header.Get("X-Api-Key") != key {
			http.Error(w, `{"error":"POST /orders with a key"}`, http.StatusBadRequest)
			return
		}
		n := posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"order":%d,"item":%q}]`, n, r.URL.Query().Get("item"))
	}))
	t.Cleanup(api.Close)
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(ordersScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(ordersCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	e := &env{Server: srv, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// order runs a turn, approves the call that waits, and returns the
	// turn's result and the tool that waited.
	order := func(prompt string, before int64) (agent.TurnResult, agent.PendingApproval) {
		t.Helper()
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "order-" + testserver.RandomID(), Prompt: prompt}
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
		require.NoError(t, err)
		p := e.awaitPending(run.GetID())
		require.Equal(t, before, posts.Load(), "nothing is sent before the decision")
		_, err = turnclient.Approve(ctx, e.Client(), run.GetID(), agent.NewApprovalDecision(p.CallID, true, "", "ana"))
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		decisions, err := srv.Store().Approvals(ctx, "demo", req.JobID)
		require.NoError(t, err)
		require.Len(t, decisions, 1)
		require.Equal(t, p.CallID, decisions[0].CallID)
		require.Equal(t, agent.ApprovalApproved, decisions[0].Outcome)
		require.Equal(t, "ana", decisions[0].Approver)
		return res, p
	}

	_, p := order("order apples", 0)
	require.Equal(t, "execute_pipeline", p.Tool)
	_, p = order("order pears", 1)
	require.Equal(t, "execute_pipeline", p.Tool)
	ag, err := srv.Store().ActiveAgent(ctx, "demo", "buyer")
	require.NoError(t, err)
	composite, ok := ag.Tool("orders")
	require.True(t, ok, "the second run promoted the pipeline: %+v", ag.Tools)
	require.Equal(t, "composite_pipeline", composite.Kind)

	res, p := order("order again plums", 2)
	require.Equal(t, "orders", p.Tool, "the composite's call waits as the pipeline's did")
	require.EqualValues(t, 3, posts.Load())
	require.Equal(t, "orders", res.Metadata.ToolCalls[0].Tool)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
}
