package pipeline

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShape(t *testing.T) {
	decode := func(s string) Pipeline {
		p, err := Decode([]byte(s))
		require.NoError(t, err)
		return p
	}
	flights := func(origin string, k int, max any) Pipeline {
		return decode(`{"session_id": "s", "pipeline": [
			{"step": "http_request", "url": "https://api.example/search", "params": {"origin": "` + origin + `", "dest": "LAX"}},
			{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": ` + toJSON(max) + `}},
			{"step": "table_sort", "field": "price"},
			{"step": "top_k", "k": ` + toJSON(k) + `}]}`)
	}
	a, b := ShapeOf(flights("NYC", 3, 500)), ShapeOf(flights("SFO", 5, 250))
	require.Equal(t, a.Hash, b.Hash, "other values, same shape")
	var names []string
	for _, p := range a.Params {
		names = append(names, p.Name+":"+p.Type)
	}
	require.Equal(t, []string{"dest:string", "origin:string", "price_max:integer", "k:integer"}, names)

	require.NotEqual(t, a.Hash, ShapeOf(flights("NYC", 3, 499.5)).Hash, "a number is not an integer")
	other := decode(`{"session_id": "s", "pipeline": [
		{"step": "http_request", "url": "https://api.example/search", "params": {"origin": "NYC", "dest": "LAX"}},
		{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 500}},
		{"step": "table_sort", "field": "price", "order": "desc"},
		{"step": "top_k", "k": 3}]}`)
	require.NotEqual(t, a.Hash, ShapeOf(other).Hash, "another order is another shape")
	require.Equal(t, a.Hash, ShapeOf(decode(`{"session_id": "other", "pipeline": [
		{"step": "http_request", "url": "https://api.example/search", "params": {"dest": "SEA", "origin": "BOS"}},
		{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 1}},
		{"step": "table_sort", "field": "price", "order": "asc"},
		{"step": "top_k", "k": 1}]}`)).Hash, "defaults, key order and session do not matter")

	bound, err := a.Bind(flights("NYC", 3, 500), map[string]any{"origin": "BOS", "dest": "MIA", "price_max": 300, "k": 2})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"origin": "BOS", "dest": "MIA"}, bound.Steps[0].Params)
	require.Equal(t, json.Number("300"), bound.Steps[1].Condition.Value)
	require.Equal(t, 2, bound.Steps[3].K)
	require.Equal(t, a.Hash, ShapeOf(bound).Hash)

	for _, tt := range []struct {
		name   string
		values map[string]any
		err    string
	}{
		{"unknown", map[string]any{"origin": "BOS", "dest": "MIA", "price_max": 1, "k": 2, "when": "now"}, `unknown argument "when"; the arguments are dest, origin, price_max, k`},
		{"missing", map[string]any{"origin": "BOS", "dest": "MIA", "k": 2}, `missing argument "price_max" (integer)`},
		{"wrong type", map[string]any{"origin": 7, "dest": "MIA", "price_max": 1, "k": 2}, `argument "origin": want a string, got`},
		{"bad k", map[string]any{"origin": "BOS", "dest": "MIA", "price_max": 1, "k": -1}, "top_k"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Bind(flights("NYC", 3, 500), tt.values)
			require.ErrorContains(t, err, tt.err)
		})
	}

	ref := ShapeOf(decode(`{"session_id": "s", "input_ref": "cas://sha256:00", "pipeline": [{"step": "top_k", "k": 2}]}`))
	require.Equal(t, "input_ref", ref.Params[0].Name)
	require.Equal(t, -1, ref.Params[0].Step)

	// A file sent by body_ref is a parameter, as input_ref is.
	send := func(ref string) Pipeline {
		return decode(`{"session_id": "s", "pipeline": [{"step": "http_request", "url": "https://ocr.example/scan", "method": "POST", "body_ref": "` + ref + `"}]}`)
	}
	upload := ShapeOf(send("cas://sha256:00"))
	require.Equal(t, upload.Hash, ShapeOf(send("previous_results[2]")).Hash)
	require.Equal(t, []Param{{Name: "body_ref", Type: "string", Step: 0, Field: "body_ref", Example: "cas://sha256:00",
		Description: "the ref of the file to send to https://ocr.example/scan"}}, upload.Params)
	bound, err = upload.Bind(send("cas://sha256:00"), map[string]any{"body_ref": "previous_results[0]"})
	require.NoError(t, err)
	require.Equal(t, "previous_results[0]", bound.Steps[0].BodyRef)
}

func toJSON(v any) string { return fmt.Sprint(v) }
