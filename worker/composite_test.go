package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
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
      credentials: [{host: "API", header: X-Api-Key, secret: "env:AGENTFLOW_TEST_FLIGHTS_KEY"}]
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
	key := "flights-key-" + randomID()
	t.Setenv("AGENTFLOW_TEST_FLIGHTS_KEY", key)
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
	res, _ := e.run(agent.TurnRequest{JobID: "p1-" + randomID(), Prompt: "flights from NYC to LAX top 3"})
	require.Equal(t, fmt.Sprintf("Found 3 flights; the first is %s at $%d.", nyc[0].Airline, nyc[0].Price), res.Output)
	require.Equal(t, 1, res.Metadata.AgentVersion)
	require.Zero(t, composites())

	sfo := cheapest("SFO", "SEA")
	res, _ = e.run(agent.TurnRequest{JobID: "p2-" + randomID(), Prompt: "flights from SFO to SEA top 5"})
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
	res, _ = e.run(agent.TurnRequest{JobID: "p3-" + randomID(), Prompt: "use the saved tool for BOS to MIA top 2"})
	require.Equal(t, fmt.Sprintf("Found 2 flights; the first is %s at $%d.", bos[0].Airline, bos[0].Price), res.Output)
	require.Equal(t, 2, res.Metadata.AgentVersion)
	require.Equal(t, "search_sorted_top", res.Metadata.ToolCalls[0].Tool)
	require.EqualValues(t, 3, api.searches.Load())

	// Another run of the shape makes no second composite.
	e.run(agent.TurnRequest{JobID: "p4-" + randomID(), Prompt: "flights from LAX to NYC top 1"})
	require.Equal(t, 1, composites())

	res, _ = e.run(agent.TurnRequest{JobID: "p5-" + randomID(), Prompt: "find a tool for cheap flights sorted by price"})
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
