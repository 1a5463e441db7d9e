package pipelinetool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/pipeline"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/pipelinetool"
)

func TestComposite(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"city":%q,"price":420},{"city":%q,"price":299},{"city":%q,"price":515}]`,
			r.URL.Query().Get("city"), r.URL.Query().Get("city"), r.URL.Query().Get("city"))
	}))
	defer api.Close()
	policy, err := egress.ParsePolicy([]string{strings.TrimPrefix(api.URL, "http://")})
	require.NoError(t, err)

	p, err := pipeline.Decode([]byte(`{"session_id": "s", "pipeline": [
		{"step": "http_request", "url": "` + api.URL + `/v1/hotels.json", "params": {"city": "Oslo"}},
		{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 500}},
		{"step": "table_sort", "field": "price"},
		{"step": "top_k", "k": 2}]}`))
	require.NoError(t, err)
	spec, err := CompositeSpec(p, pipeline.ShapeOf(p), PipelineConfig{}, ExecutePipeline().Approval)
	require.NoError(t, err)
	require.Equal(t, ExecutePipeline().Approval, spec.Approval, "the policy of the tool that ran it")
	require.Equal(t, "hotels_filtered_sorted_top", spec.Name)
	require.Equal(t, "A saved pipeline: GET "+api.URL+"/v1/hotels.json with city; then keep rows where price < price_max; "+
		"then sort by price asc; then keep the first k. Arguments: city, price_max, k.", spec.Description)

	r, err := tools.NewRegistry(Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	call := func(args string) (Output, error) {
		return r.Execute(context.Background(), spec, Call{Args: json.RawMessage(args), TenantID: "demo", HTTP: loopbackOpen(t).Client(policy)})
	}
	out, err := call(`{"city": "Rome", "price_max": 450, "k": 1}`)
	require.NoError(t, err)
	require.JSONEq(t, `[{"city":"Rome","price":299}]`, string(out.Data))

	for _, tt := range []struct{ args, err string }{
		{`{"city": "Rome", "k": 1}`, `missing argument "price_max" (integer)`},
		{`{"city": "Rome", "price_max": 450, "k": 1, "sort": "desc"}`, `unknown argument "sort"`},
		{`{"city": ["Rome"], "price_max": 450, "k": 1}`, `argument "city": want a string`},
		{`[1]`, "arguments must be a JSON object"},
	} {
		_, err := call(tt.args)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		require.ErrorContains(t, err, tt.err)
	}

	// A declared composite: its config is checked, its arguments come
	// from its pipeline when the catalog is applied.
	declared := agent.Tool{Name: "cheap_hotels", Kind: "composite_pipeline", Config: spec.Config}
	got, err := CompositePipeline().Resolve(context.Background(), declared, ResolveEnv{})
	require.NoError(t, err)
	require.JSONEq(t, string(spec.Parameters), string(got[0].Parameters))
	for _, tt := range []struct{ config, err string }{
		{`{}`, "pipeline is required"},
		{`{"pipeline": {"session_id": "s", "pipeline": []}}`, "pipeline:"},
		{`{"pipeline": ` + mustJSON(t, p) + `, "shape": "abc"}`, "shape abc is not its pipeline's"},
		{`{"pipeline": ` + mustJSON(t, p) + `, "ttl": 5}`, `unknown field "ttl"`},
	} {
		_, err := CompositePipeline().Build(agent.Tool{Name: "c", Kind: "composite_pipeline", Config: json.RawMessage(tt.config)}, Deps{}.WithDefaults())
		require.ErrorContains(t, err, tt.err, tt.config)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestSearchToolsArguments(t *testing.T) {
	r, err := tools.NewRegistry(Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	spec := agent.Tool{Name: "search_tools", Kind: "search_tools"}
	for _, tt := range []struct{ args, err string }{
		{`{"query": "  "}`, "query is required"},
		{`{"query": "flights", "limit": 0}`, "limit must be 1 to 50, got 0"},
		{`{"query": "flights", "limit": 51}`, "limit must be 1 to 50, got 51"},
		{`{"query": "flights", "top": 3}`, `unknown field "top"`},
		{`{"query": "` + strings.Repeat("x", 501) + `"}`, "at most 500 bytes"},
	} {
		_, err := r.Execute(context.Background(), spec, Call{Args: json.RawMessage(tt.args)})
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		require.ErrorContains(t, err, tt.err)
	}
}
