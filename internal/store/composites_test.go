package store_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func compositeTool(name string) agent.Tool {
	return agent.Tool{Name: name, Kind: store.CompositeKind, Description: "A saved pipeline: GET flights search with origin, dest; then sort by price asc.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"origin":{"type":"string"},"dest":{"type":"string"}}}`),
		Config:     json.RawMessage(`{"pipeline":{}}`)}
}

func TestRecordPipelineRun(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	calc := agent.Tool{Name: "calc", Kind: "calculator", Description: "arithmetic", Parameters: json.RawMessage(`{"type":"object"}`)}
	_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", Tools: []agent.Tool{calc},
		Agents: []agent.Agent{
			{ID: "takes", Model: "openai:m", Tools: []agent.Tool{{Name: "calc"}}, Composites: true},
			{ID: "not", Model: "openai:m", Tools: []agent.Tool{{Name: "calc"}}},
		}}}}, false)
	require.NoError(t, err)
	before, err := s.TenantSettings(ctx, "demo")
	require.NoError(t, err)

	run := func(job, call, shape string) string {
		name, err := s.RecordPipelineRun(ctx, "demo", job, call, shape, compositeTool("search_sorted"))
		require.NoError(t, err)
		return name
	}
	require.Empty(t, run("j1", "c1", "shape-a"), "one run promotes nothing")
	require.Empty(t, run("j1", "c1", "shape-a"), "a retried call is the same run")
	require.Empty(t, run("j2", "c1", "shape-b"), "another shape is counted apart")
	require.Equal(t, "search_sorted", run("j2", "c1", "shape-a"))
	require.Empty(t, run("j3", "c1", "shape-a"), "a shape is promoted once")

	takes, err := s.ActiveAgent(ctx, "demo", "takes")
	require.NoError(t, err)
	require.Equal(t, 2, takes.Version, "the promotion made a new version")
	_, ok := takes.Tool("search_sorted")
	require.True(t, ok)
	old, err := s.AgentVersion(ctx, "demo", "takes", 1)
	require.NoError(t, err)
	_, ok = old.Tool("search_sorted")
	require.False(t, ok, "turns on version 1 keep their tools")
	not, err := s.ActiveAgent(ctx, "demo", "not")
	require.NoError(t, err)
	require.Equal(t, 1, not.Version)
	after, err := s.TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Greater(t, after.Version, before.Version, "the catalog version moves")

	// Another shape (run once above) with the same name gets its own.
	require.Equal(t, "search_sorted_2", run("j4", "c1", "shape-b"))

	// Applying the catalog again keeps the agent's composites.
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Agents: []agent.Agent{{ID: "takes", Model: "openai:m", Tools: []agent.Tool{{Name: "calc"}}, Composites: true, Description: "changed"}}}}}, false)
	require.NoError(t, err)
	takes, err = s.ActiveAgent(ctx, "demo", "takes")
	require.NoError(t, err)
	var names []string
	for _, tool := range takes.Tools {
		names = append(names, tool.Name)
	}
	require.Equal(t, []string{"calc", "search_sorted", "search_sorted_2"}, names)

	// Turned off, runs are not even counted.
	off := 0
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", PromoteAfter: &off}}}, false)
	require.NoError(t, err)
	run("j6", "c1", "shape-c")
	require.Empty(t, run("j7", "c1", "shape-c"))
	require.Zero(t, count(t, s, `SELECT count(*) FROM pipeline_runs WHERE shape = 'shape-c'`))
	// An unknown tenant promotes nothing.
	name, err := s.RecordPipelineRun(ctx, "nobody", "j", "c", "shape-a", compositeTool("x"))
	require.NoError(t, err)
	require.Empty(t, name)
}

func TestRecordPipelineRunConcurrent(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Agents: []agent.Agent{{ID: "a", Model: "openai:m", Composites: true}}}}}, false)
	require.NoError(t, err)
	var wg sync.WaitGroup
	names := make([]string, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			names[i], errs[i] = s.RecordPipelineRun(ctx, "demo", fmt.Sprintf("job-%d", i), "c", "shape", compositeTool("search_sorted"))
		})
	}
	wg.Wait()
	promoted := 0
	for i := range names {
		require.NoError(t, errs[i])
		if names[i] != "" {
			promoted++
		}
	}
	require.Equal(t, 1, promoted, "one composite, not two")
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM tools WHERE tenant_id = 'demo'`))
}

func TestSearchTools(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	tool := func(name, desc, arg string) agent.Tool {
		return agent.Tool{Name: name, Kind: "calculator", Description: desc, Parameters: json.RawMessage(`{"type":"object","properties":{"` + arg + `":{"type":"string"}}}`)}
	}
	_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{
		{TenantID: "demo", Tools: []agent.Tool{
			tool("calc", "Evaluate arithmetic exactly.", "expression"),
			compositeTool("search_sorted"),
			tool("weather_now", "The current weather of a city.", "city"),
		}},
		{TenantID: "acme", Tools: []agent.Tool{compositeTool("flights_cheap")}},
	}}, false)
	require.NoError(t, err)
	search := func(tenant, q string, limit int) []string {
		found, err := s.SearchTools(ctx, tenant, q, limit)
		require.NoError(t, err)
		var names []string
		for _, f := range found {
			names = append(names, f.Name)
		}
		return names
	}
	require.Equal(t, []string{"search_sorted"}, search("demo", "cheap flights sorted by price", 10))
	require.Equal(t, []string{"weather_now"}, search("demo", "what's the weather", 10))
	require.ElementsMatch(t, []string{"calc", "search_sorted"}, search("demo", "expression origin", 10), "names, descriptions and arguments")
	require.Len(t, search("demo", "expression origin", 1), 1)
	require.Empty(t, search("demo", "the and of", 10), "stop words alone match nothing")
	require.Empty(t, search("demo", `'":| & !( 127.0.0.1:8089/x`, 10), "query syntax is text")
	require.Equal(t, []string{"flights_cheap"}, search("acme", "flights", 10))
	require.NotContains(t, search("demo", "flights", 10), "flights_cheap", "one tenant's tools only")
}
