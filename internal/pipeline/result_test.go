package pipeline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResultAndPreview(t *testing.T) {
	long := strings.Repeat("x", 300)
	rows := `[{"id": 1, "name": "` + long + `", "tags": [1, 2, 3, 4]}, {"id": "2", "name": null}, {"id": 3}]`
	p, err := Decode([]byte(callOn(`[{"step": "top_k", "k": 10}]`)))
	require.NoError(t, err)
	res, err := Run(t.Context(), p, memEnv(map[string]string{"in": rows}))
	require.NoError(t, err)
	require.Equal(t, 3, res.Rows)
	require.Equal(t, []Column{
		{Name: "id", Types: []string{"string", "number"}},
		{Name: "name", Types: []string{"string", "null", "missing"}},
		{Name: "tags", Types: []string{"array", "missing"}},
	}, res.Schema)

	pv := res.Preview(2)
	b, err := json.Marshal(pv)
	require.NoError(t, err)
	require.JSONEq(t, `{"kind": "table", "rows": 3, "truncated": true,
		"schema": [{"name": "id", "types": ["string", "number"]}, {"name": "name", "types": ["string", "null", "missing"]}, {"name": "tags", "types": ["array", "missing"]}],
		"head": [{"id": 1, "name": "`+strings.Repeat("x", 200)+`…", "tags": [1, 2]}, {"id": "2", "name": null}]}`, string(b))

	pv = res.Preview(0)
	require.Empty(t, pv.Head)
	require.True(t, pv.Truncated)

	doc, err := Decode([]byte(callOn(`[{"step": "jq_transform", "query": "{n: length, all: .}"}]`)))
	require.NoError(t, err)
	res, err = Run(t.Context(), doc, memEnv(map[string]string{"in": `[{"a": 1}, {"a": 2}, {"a": 3}]`}))
	require.NoError(t, err)
	require.Equal(t, KindDocument, res.Value.Kind)
	require.Zero(t, res.Rows)
	require.Nil(t, res.Schema)
	b, err = json.Marshal(res.Preview(1))
	require.NoError(t, err)
	require.JSONEq(t, `{"kind": "document", "rows": 0, "document": {"n": 3, "all": [{"a": 1}]}, "truncated": true}`, string(b))
}

func TestKey(t *testing.T) {
	decode := func(raw string) Pipeline {
		p, err := Decode([]byte(raw))
		require.NoError(t, err)
		return p
	}
	base := decode(`{"session_id": "a", "pipeline": [{"step": "http_request", "url": "https://x.example", "params": {"b": 1, "a": 2}}, {"step": "table_sort", "field": "p"}]}`)
	same := []Pipeline{
		decode(`{"session_id": "other", "pipeline": [{"step": "http_request", "url": "https://x.example", "method": "GET", "params": {"a": 2, "b": 1}}, {"step": "table_sort", "field": "p", "order": "asc"}]}`),
		{Steps: []Step{{Op: OpHTTPRequest, URL: "https://x.example", Params: map[string]any{"a": json.Number("2"), "b": json.Number("1")}}, {Op: OpTableSort, Field: "p"}}},
	}
	different := []Pipeline{
		decode(`{"session_id": "a", "pipeline": [{"step": "http_request", "url": "https://x.example", "params": {"b": 1, "a": 3}}, {"step": "table_sort", "field": "p"}]}`),
		decode(`{"session_id": "a", "pipeline": [{"step": "http_request", "url": "https://x.example", "params": {"b": 1, "a": 2}}, {"step": "table_sort", "field": "p", "order": "desc"}]}`),
		decode(`{"session_id": "a", "input_ref": "r", "pipeline": [{"step": "table_sort", "field": "p"}]}`),
		decode(`{"session_id": "a", "input_ref": "r2", "pipeline": [{"step": "table_sort", "field": "p"}]}`),
	}
	k := Key(base)
	require.Len(t, k, 64)
	for i, p := range same {
		require.Equal(t, k, Key(p), "same %d", i)
	}
	seen := map[string]bool{k: true}
	for i, p := range different {
		require.False(t, seen[Key(p)], "different %d", i)
		seen[Key(p)] = true
	}
	// A hand-built value JSON cannot hold still gets a stable key.
	odd := Pipeline{InputRef: "r", Steps: []Step{{Op: OpTableFilter, Condition: &Condition{Field: "a", Op: "=", Value: struct{ X int }{1}}}}}
	require.Equal(t, Key(odd), Key(odd))
}
