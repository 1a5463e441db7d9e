package pipeline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// memEnv serves refs from JSON texts, as a caller serves blobs.
func memEnv(refs map[string]string) Env {
	return Env{Load: func(_ context.Context, ref string) (Value, error) {
		s, ok := refs[ref]
		if !ok {
			return Value{}, agent.Errorf(agent.CodeNotFound, "no data under ref %q", ref)
		}
		return Parse([]byte(s), "application/json", ref)
	}}
}

// stepCase runs steps over input (input_ref "in") and checks the result's
// JSON, or the error's message, and the warnings.
type stepCase struct {
	name  string
	input string
	steps string
	want  string
	err   string
	warns []string
}

func runCases(t *testing.T, tests []stepCase, refs map[string]string) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := map[string]string{"in": tt.input}
			for k, v := range refs {
				all[k] = v
			}
			p, err := Decode([]byte(callOn(tt.steps)))
			require.NoError(t, err)
			res, err := Run(t.Context(), p, memEnv(all))
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			got, err := json.Marshal(res.Value)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
			require.Equal(t, tt.warns, res.Warnings)
		})
	}
}

func TestTableSort(t *testing.T) {
	runCases(t, []stepCase{
		{name: "numbers asc", input: `[{"p": 3}, {"p": 1}, {"p": 2.5}]`,
			steps: `[{"step": "table_sort", "field": "p"}]`, want: `[{"p": 1}, {"p": 2.5}, {"p": 3}]`},
		{name: "numbers desc", input: `[{"p": 3}, {"p": 1}, {"p": 2.5}]`,
			steps: `[{"step": "table_sort", "field": "p", "order": "desc"}]`, want: `[{"p": 3}, {"p": 2.5}, {"p": 1}]`},
		{name: "numbers not as text", input: `[{"p": 10}, {"p": 9}, {"p": 100}]`,
			steps: `[{"step": "table_sort", "field": "p"}]`, want: `[{"p": 9}, {"p": 10}, {"p": 100}]`},
		{name: "numeric strings as numbers, then text, booleans, null and missing last", input: `[{"p": "10", "i": 0}, {"p": null, "i": 1}, {"i": 2}, {"p": "abc", "i": 3}, {"p": true, "i": 4}, {"p": 9, "i": 5}]`,
			steps: `[{"step": "table_sort", "field": "p"}]`,
			want:  `[{"p": 9, "i": 5}, {"p": "10", "i": 0}, {"p": "abc", "i": 3}, {"p": true, "i": 4}, {"p": null, "i": 1}, {"i": 2}]`},
		{name: "desc keeps null and missing last", input: `[{"p": null, "i": 0}, {"p": 1, "i": 1}, {"i": 2}, {"p": 2, "i": 3}]`,
			steps: `[{"step": "table_sort", "field": "p", "order": "desc"}]`,
			want:  `[{"p": 2, "i": 3}, {"p": 1, "i": 1}, {"p": null, "i": 0}, {"i": 2}]`},
		{name: "stable in both directions", input: `[{"p": 1, "i": 0}, {"p": 0, "i": 1}, {"p": 1, "i": 2}]`,
			steps: `[{"step": "table_sort", "field": "p", "order": "desc"}]`,
			want:  `[{"p": 1, "i": 0}, {"p": 1, "i": 2}, {"p": 0, "i": 1}]`},
		{name: "strings by bytes", input: `[{"s": "b"}, {"s": "a"}, {"s": "B"}]`,
			steps: `[{"step": "table_sort", "field": "s"}]`, want: `[{"s": "B"}, {"s": "a"}, {"s": "b"}]`},
		{name: "integers beyond float precision", input: `[{"id": 9007199254740993}, {"id": 9007199254740992}]`,
			steps: `[{"step": "table_sort", "field": "id"}]`, want: `[{"id": 9007199254740992}, {"id": 9007199254740993}]`},
		{name: "nested field", input: `[{"price": {"amount": 5}}, {"price": {"amount": 2}}]`,
			steps: `[{"step": "table_sort", "field": "price.amount"}]`, want: `[{"price": {"amount": 2}}, {"price": {"amount": 5}}]`},
		{name: "envelope unwrapped", input: `{"count": 2, "flights": [{"p": 2}, {"p": 1}]}`,
			steps: `[{"step": "table_sort", "field": "p"}]`, want: `[{"p": 1}, {"p": 2}]`},
		{name: "empty envelope", input: `{"count": 0, "flights": []}`,
			steps: `[{"step": "table_sort", "field": "p"}]`, want: `[]`},
		{name: "empty table", input: `[]`, steps: `[{"step": "table_sort", "field": "p"}]`, want: `[]`},
		{name: "field in no row", input: `[{"id": 1, "price": 2}]`, steps: `[{"step": "table_sort", "field": "pirce"}]`,
			err: `step 0 (table_sort): field "pirce" is in no row; the rows have id, price`},
		{name: "document", input: `{"a": 1, "b": [1, 2]}`, steps: `[{"step": "table_sort", "field": "a"}]`,
			err: `step 0 (table_sort): needs a table (an array of objects) but the input is an object with fields a, b; reshape it with a jq_transform step (wrap a stream in [ ] to get an array)`},
		{name: "two envelopes", input: `{"a": [{"x": 1}], "b": [{"x": 2}]}`, steps: `[{"step": "table_sort", "field": "x"}]`,
			err: `step 0 (table_sort): needs a table (an array of objects) but the input is an object with several arrays of objects (a, b); pick one with a jq_transform step such as {"step": "jq_transform", "query": ".a"}`},
		{name: "array of numbers", input: `[3, 1]`, steps: `[{"step": "table_sort", "field": "x"}]`,
			err: `step 0 (table_sort): needs a table (an array of objects) but element 0 of the input array is 3; reshape it with a jq_transform step, e.g. map({value: .})`},
		{name: "a string", input: `"hello"`, steps: `[{"step": "table_sort", "field": "x"}]`,
			err: `step 0 (table_sort): needs a table (an array of objects) but the input is "hello"`},
	}, nil)
}

func TestTableFilter(t *testing.T) {
	flights := `[{"id": 1, "price": 300, "to": "LAX", "tags": ["red", "eye"]}, {"id": 2, "price": "450.50", "to": "SFO"},
		{"id": 3, "price": 600, "to": "LAX", "tags": []}, {"id": 4, "price": null, "to": "BOS"}, {"id": 5, "to": "lax"}, {"id": 6, "price": "n/a", "to": "SEA"}]`
	filter := func(cond string) string {
		return `[{"step": "table_filter", "condition": ` + cond + `}, {"step": "table_select", "fields": ["id"]}]`
	}
	runCases(t, []stepCase{
		{name: "< number, numeric strings as numbers", input: flights, steps: filter(`{"field": "price", "op": "<", "value": 500}`),
			want:  `[{"id": 1}, {"id": 2}]`,
			warns: []string{`step 0 (table_filter): 1 rows were dropped because their price (e.g. "n/a") cannot be compared with 500 by "<"`}},
		{name: ">= number", input: flights, steps: filter(`{"field": "price", "op": ">=", "value": 450.5}`), want: `[{"id": 2}, {"id": 3}]`,
			warns: []string{`step 0 (table_filter): 1 rows were dropped because their price (e.g. "n/a") cannot be compared with 450.5 by ">="`}},
		{name: "<= against a numeric string; other text compares as text", input: flights, steps: filter(`{"field": "price", "op": "<=", "value": "300"}`), want: `[{"id": 1}]`},
		{name: "> string compares text", input: flights, steps: filter(`{"field": "to", "op": ">", "value": "LAX"}`), want: `[{"id": 2}, {"id": 5}, {"id": 6}]`},
		{name: "= string is case-sensitive", input: flights, steps: filter(`{"field": "to", "op": "=", "value": "LAX"}`), want: `[{"id": 1}, {"id": 3}]`},
		{name: "= number meets a numeric string", input: flights, steps: filter(`{"field": "price", "op": "=", "value": 450.5}`), want: `[{"id": 2}]`},
		{name: "= null matches null and missing", input: flights, steps: filter(`{"field": "price", "op": "=", "value": null}`), want: `[{"id": 4}, {"id": 5}]`},
		{name: "!= null", input: flights, steps: filter(`{"field": "price", "op": "!=", "value": null}`), want: `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 6}]`},
		{name: "!= string", input: flights, steps: filter(`{"field": "to", "op": "!=", "value": "LAX"}`), want: `[{"id": 2}, {"id": 4}, {"id": 5}, {"id": 6}]`},
		{name: "in", input: flights, steps: filter(`{"field": "to", "op": "in", "value": ["SFO", "BOS"]}`), want: `[{"id": 2}, {"id": 4}]`},
		{name: "in with numbers and null", input: flights, steps: filter(`{"field": "id", "op": "in", "value": ["1", 3, null]}`), want: `[{"id": 1}, {"id": 3}]`},
		{name: "contains in a string", input: flights, steps: filter(`{"field": "to", "op": "contains", "value": "A"}`), want: `[{"id": 1}, {"id": 3}, {"id": 6}]`},
		{name: "contains in an array", input: flights, steps: filter(`{"field": "tags", "op": "contains", "value": "eye"}`), want: `[{"id": 1}]`},
		{name: "contains a number in text", input: `[{"s": "abc123"}, {"s": "abc"}]`, steps: `[{"step": "table_filter", "condition": {"field": "s", "op": "contains", "value": 123}}]`, want: `[{"s": "abc123"}]`},
		{name: "booleans", input: `[{"ok": true}, {"ok": false}, {"ok": "true"}]`, steps: `[{"step": "table_filter", "condition": {"field": "ok", "op": "=", "value": true}}]`, want: `[{"ok": true}]`},
		{name: "nested field", input: `[{"a": {"b": 1}}, {"a": {"b": 2}}]`, steps: `[{"step": "table_filter", "condition": {"field": "a.b", "op": ">", "value": 1}}]`, want: `[{"a": {"b": 2}}]`},
		{name: "nothing matches", input: flights, steps: filter(`{"field": "price", "op": ">", "value": 1000}`), want: `[]`,
			warns: []string{`step 0 (table_filter): 1 rows were dropped because their price (e.g. "n/a") cannot be compared with 1000 by ">"`}},
		{name: "field in no row", input: flights, steps: filter(`{"field": "cost", "op": "<", "value": 1}`),
			err: `step 0 (table_filter): condition.field "cost" is in no row; the rows have id, price, tags, to`},
		{name: "a document", input: `{"price": 3}`, steps: filter(`{"field": "price", "op": "<", "value": 1}`),
			err: `step 0 (table_filter): needs a table (an array of objects) but the input is an object with fields price; reshape it with a jq_transform step (wrap a stream in [ ] to get an array)`},
	}, nil)
}

func TestTableSelectTopK(t *testing.T) {
	rows := `[{"id": 1, "name": "a", "price": {"amount": 3}}, {"id": 2, "name": "b"}, {"id": 3}]`
	runCases(t, []stepCase{
		{name: "select", input: rows, steps: `[{"step": "table_select", "fields": ["name", "id"]}]`,
			want: `[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": null}]`},
		{name: "select nested", input: rows, steps: `[{"step": "table_select", "fields": ["id", "price.amount"]}]`,
			want: `[{"id": 1, "price.amount": 3}, {"id": 2, "price.amount": null}, {"id": 3, "price.amount": null}]`},
		{name: "select a field in no row", input: rows, steps: `[{"step": "table_select", "fields": ["id", "cost"]}]`,
			err: `step 0 (table_select): fields "cost" is in no row; the rows have id, name, price`},
		{name: "top_k", input: rows, steps: `[{"step": "top_k", "k": 2}]`, want: `[{"id": 1, "name": "a", "price": {"amount": 3}}, {"id": 2, "name": "b"}]`},
		{name: "top_k past the end", input: rows, steps: `[{"step": "top_k", "k": 10}, {"step": "table_select", "fields": ["id"]}]`, want: `[{"id": 1}, {"id": 2}, {"id": 3}]`},
		{name: "top_k of a document", input: `{"a": 1}`, steps: `[{"step": "top_k", "k": 1}]`,
			err: `step 0 (top_k): needs a table (an array of objects) but the input is an object with fields a; reshape it with a jq_transform step (wrap a stream in [ ] to get an array)`},
	}, nil)
}

func TestGroupBy(t *testing.T) {
	sales := `[{"cat": "a", "rev": 10, "day": "2024-03-02"}, {"cat": "b", "rev": 2.5, "day": "2024-03-01"}, {"cat": "a", "rev": "5", "day": "2024-03-05"},
		{"cat": "b", "rev": null, "day": "2024-02-28"}, {"cat": null, "rev": 1}, {"rev": 4}]`
	runCases(t, []stepCase{
		{name: "sum, groups in order of appearance, null and missing together", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "sum", "field": "rev"}]`,
			want: `[{"cat": "a", "sum_rev": 15}, {"cat": "b", "sum_rev": 2.5}, {"cat": null, "sum_rev": 5}]`},
		{name: "avg skips null", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "avg", "field": "rev"}]`,
			want: `[{"cat": "a", "avg_rev": 7.5}, {"cat": "b", "avg_rev": 2.5}, {"cat": null, "avg_rev": 2.5}]`},
		{name: "min of numbers", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "min", "field": "rev"}]`,
			want: `[{"cat": "a", "min_rev": "5"}, {"cat": "b", "min_rev": 2.5}, {"cat": null, "min_rev": 1}]`},
		{name: "max of date strings", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "max", "field": "day"}]`,
			want: `[{"cat": "a", "max_day": "2024-03-05"}, {"cat": "b", "max_day": "2024-03-01"}, {"cat": null, "max_day": null}]`},
		{name: "count rows", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "count"}]`,
			want: `[{"cat": "a", "count": 2}, {"cat": "b", "count": 2}, {"cat": null, "count": 2}]`},
		{name: "count values of a field", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "count", "field": "rev"}]`,
			want: `[{"cat": "a", "count_rev": 2}, {"cat": "b", "count_rev": 1}, {"cat": null, "count_rev": 2}]`},
		{name: "whole table", input: sales, steps: `[{"step": "groupby", "agg": "sum", "field": "rev"}]`, want: `[{"sum_rev": 22.5}]`},
		{name: "whole empty table", input: `[]`, steps: `[{"step": "groupby", "agg": "count"}]`, want: `[{"count": 0}]`},
		{name: "by empty table", input: `[]`, steps: `[{"step": "groupby", "by": ["a"], "agg": "count"}]`, want: `[]`},
		{name: "1 and \"1\" are one group", input: `[{"k": 1}, {"k": "1"}, {"k": 1.0}, {"k": "01"}]`, steps: `[{"step": "groupby", "by": ["k"], "agg": "count"}]`,
			want: `[{"k": 1, "count": 3}, {"k": "01", "count": 1}]`},
		{name: "two by fields", input: `[{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "x"}]`, steps: `[{"step": "groupby", "by": ["a", "b"], "agg": "count"}]`,
			want: `[{"a": 1, "b": "x", "count": 2}, {"a": 1, "b": "y", "count": 1}]`},
		{name: "integer sums stay exact", input: `[{"n": 9007199254740993}, {"n": 1}]`, steps: `[{"step": "groupby", "agg": "sum", "field": "n"}]`,
			want: `[{"sum_n": 9007199254740994}]`},
		{name: "sum of a text value", input: `[{"rev": 1}, {"rev": 2}, {"rev": "n/a"}]`, steps: `[{"step": "groupby", "agg": "sum", "field": "rev"}]`,
			err: `step 0 (groupby): row 2: rev is "n/a", not a number; sum adds numbers: drop such rows with table_filter first`},
		{name: "by field in no row", input: sales, steps: `[{"step": "groupby", "by": ["region"], "agg": "count"}]`,
			err: `step 0 (groupby): by "region" is in no row; the rows have cat, day, rev`},
		{name: "field in no row", input: sales, steps: `[{"step": "groupby", "by": ["cat"], "agg": "sum", "field": "revenue"}]`,
			err: `step 0 (groupby): field "revenue" is in no row; the rows have cat, day, rev`},
	}, nil)
}

func TestJoin(t *testing.T) {
	refs := map[string]string{
		"airlines": `[{"id": 1, "name": "Delta"}, {"id": "2", "name": "United"}, {"id": 4, "name": "Alaska"}]`,
		"codes":    `[{"id": 1, "code": "DL"}, {"id": 1, "code": "DAL"}]`,
		"bad":      `{"x": 1}`,
	}
	flights := `[{"fid": "a", "id": 1, "name": "f1"}, {"fid": "b", "id": 2}, {"fid": "c", "id": 3}, {"fid": "d"}]`
	runCases(t, []stepCase{
		{name: "inner, numbers meet numeric strings, clashing names get _right", input: flights, steps: `[{"step": "join", "right": "airlines", "on": "id"}]`,
			want: `[{"fid": "a", "id": 1, "name": "f1", "name_right": "Delta"}, {"fid": "b", "id": 2, "name": "United"}]`},
		{name: "left keeps unmatched rows with null right fields", input: flights, steps: `[{"step": "join", "right": "airlines", "on": "id", "how": "left"}, {"step": "table_select", "fields": ["fid", "name", "name_right"]}]`,
			want: `[{"fid": "a", "name": "f1", "name_right": "Delta"}, {"fid": "b", "name": "United", "name_right": null}, {"fid": "c", "name": null, "name_right": null}, {"fid": "d", "name": null, "name_right": null}]`},
		{name: "several matches, in right order", input: flights, steps: `[{"step": "join", "right": "codes", "on": "id"}, {"step": "table_select", "fields": ["fid", "code"]}]`,
			want: `[{"fid": "a", "code": "DL"}, {"fid": "a", "code": "DAL"}]`},
		{name: "right ref not found", input: flights, steps: `[{"step": "join", "right": "nope", "on": "id"}]`,
			err: `step 0 (join): right: load "nope": no data under ref "nope"`},
		{name: "right not a table", input: flights, steps: `[{"step": "join", "right": "bad", "on": "id"}]`,
			err: `step 0 (join): right: needs a table (an array of objects) but the input is an object with fields x; reshape it with a jq_transform step (wrap a stream in [ ] to get an array)`},
		{name: "on in no right row", input: flights, steps: `[{"step": "join", "right": "codes", "on": "fid"}]`,
			err: `step 0 (join): on (in the right table) "fid" is in no row; the rows have code, id`},
	}, refs)

	t.Run("both refs as step 0", func(t *testing.T) {
		p, err := Decode([]byte(call(`[{"step": "join", "left": "codes", "right": "airlines", "on": "id"}]`)))
		require.NoError(t, err)
		res, err := Run(t.Context(), p, memEnv(refs))
		require.NoError(t, err)
		got, _ := json.Marshal(res.Value)
		require.JSONEq(t, `[{"id": 1, "code": "DL", "name": "Delta"}, {"id": 1, "code": "DAL", "name": "Delta"}]`, string(got))
	})
	t.Run("not found keeps the caller's code", func(t *testing.T) {
		p, err := Decode([]byte(callOn(`[{"step": "join", "right": "nope", "on": "id"}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, memEnv(map[string]string{"in": `[]`}))
		require.Equal(t, agent.CodeNotFound, agent.ErrorCode(err))
	})
	t.Run("a join past MaxRows", func(t *testing.T) {
		p, err := Decode([]byte(callOn(`[{"step": "join", "right": "r", "on": "k"}]`)))
		require.NoError(t, err)
		env := memEnv(map[string]string{"in": `[{"k": 1}, {"k": 1}, {"k": 1}]`, "r": `[{"k": 1}, {"k": 1}]`})
		env.Limits.MaxRows = 5
		_, err = Run(t.Context(), p, env)
		require.EqualError(t, err, `step 0 (join): the join makes more than 5 rows: "k" repeats on both sides; make it unique on one side (groupby) or filter first`)
	})
}

func TestParseDate(t *testing.T) {
	runCases(t, []stepCase{
		{name: "date", input: `[{"d": "2024-03-01"}, {"d": "2024-12-31"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`,
			want: `[{"d": "2024-03-01T00:00:00Z"}, {"d": "2024-12-31T00:00:00Z"}]`},
		{name: "date and time", input: `[{"d": "01/03/2024 14:30"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%d/%m/%Y %H:%M"}]`,
			want: `[{"d": "2024-03-01T14:30:00Z"}]`},
		{name: "zone kept", input: `[{"d": "2024-03-01T10:00:00+0200"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%dT%H:%M:%S%z"}]`,
			want: `[{"d": "2024-03-01T10:00:00+02:00"}]`},
		{name: "fractions", input: `[{"d": "2024-03-01 10:00:00.123"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d %H:%M:%S.%f"}]`,
			want: `[{"d": "2024-03-01T10:00:00.123Z"}]`},
		{name: "epoch seconds as a number", input: `[{"t": 1700000000}]`, steps: `[{"step": "parse_date", "field": "t", "format": "%s"}]`,
			want: `[{"t": "2023-11-14T22:13:20Z"}]`},
		{name: "month names", input: `[{"d": "Mar 1, 2024"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%b %d, %Y"}]`,
			want: `[{"d": "2024-03-01T00:00:00Z"}]`},
		{name: "null, missing and empty left alone", input: `[{"d": null}, {}, {"d": ""}, {"d": "2024-03-01"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`,
			want: `[{"d": null}, {}, {"d": ""}, {"d": "2024-03-01T00:00:00Z"}]`},
		{name: "nested field", input: `[{"m": {"d": "2024-03-01"}}]`, steps: `[{"step": "parse_date", "field": "m.d", "format": "%Y-%m-%d"}]`,
			want: `[{"m": {"d": "2024-03-01T00:00:00Z"}}]`},
		{name: "some do not parse: kept, with a warning", input: `[{"d": "2024-03-01"}, {"d": "n/a"}, {"d": "2024-13-01"}, {"d": true}]`,
			steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`,
			want:  `[{"d": "2024-03-01T00:00:00Z"}, {"d": "n/a"}, {"d": "2024-13-01"}, {"d": true}]`,
			warns: []string{`step 0 (parse_date): 3 of 4 values did not match format "%Y-%m-%d" and were left as they were; the first is row 1: "n/a" (cannot parse "%Y")`}},
		{name: "none parse: the format is wrong", input: `[{"d": "03/01/2024"}, {"d": "03/02/2024"}]`, steps: `[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`,
			err: `step 0 (parse_date): row 0: d "03/01/2024" does not match format "%Y-%m-%d" (expected '-'); no value matched, so fix the format (strftime: %Y-%m-%d, %d/%m/%Y %H:%M, %Y-%m-%dT%H:%M:%S%z, ...)`},
		{name: "field in no row", input: `[{"d": "2024-03-01"}]`, steps: `[{"step": "parse_date", "field": "date", "format": "%Y-%m-%d"}]`,
			err: `step 0 (parse_date): field "date" is in no row; the rows have d`},
	}, nil)
}

// TestStepsLeaveInputsAlone: a step that changes rows copies them, so a
// caller's cached Value stays as it was.
func TestStepsLeaveInputsAlone(t *testing.T) {
	in, err := Parse([]byte(`[{"d": "2024-03-01", "m": {"d": "2024-03-02"}, "s": "a1"}]`), "", "")
	require.NoError(t, err)
	before, _ := json.Marshal(in)
	env := Env{Load: func(context.Context, string) (Value, error) { return in, nil }}
	for _, steps := range []string{
		`[{"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`,
		`[{"step": "parse_date", "field": "m.d", "format": "%Y-%m-%d"}]`,
		`[{"step": "regex_extract", "field": "s", "pattern": "(?P<s>\\d)"}]`,
		`[{"step": "join", "right": "in", "on": "d", "how": "left"}]`,
		`[{"step": "jq_transform", "query": ".[0].d = 1 | .[0].m.d = 2"}]`,
	} {
		p, err := Decode([]byte(callOn(steps)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, env)
		require.NoError(t, err)
		after, _ := json.Marshal(in)
		require.JSONEq(t, string(before), string(after), steps)
	}
}

func TestLimits(t *testing.T) {
	rows := `[{"a": "xxxxxxxxxx"}, {"a": "yyyyyyyyyy"}, {"a": "zzzzzzzzzz"}]`
	tests := []struct {
		name   string
		steps  string
		limits Limits
		err    string
	}{
		{"input over MaxRows", `[{"step": "top_k", "k": 1}]`, Limits{MaxRows: 2},
			`input_ref: "in": output has 3 rows; the limit is 2: filter or aggregate earlier, or ask the source for fewer`},
		{"input over MaxBytes", `[{"step": "top_k", "k": 1}]`, Limits{MaxBytes: 20},
			`input_ref: "in": the output is over the limit of 20 bytes of JSON; narrow it: fewer rows or fields (table_filter, top_k, table_select, groupby) or a smaller request`},
		{"jq output over MaxBytes", `[{"step": "jq_transform", "query": "[range(1000)]"}]`, Limits{MaxBytes: 1000},
			`step 0 (jq_transform): the output of query "[range(1000)]" is over the limit of 1000 bytes of JSON; narrow it: fewer rows or fields (table_filter, top_k, table_select, groupby) or a smaller request`},
		{"jq outputs over MaxRows", `[{"step": "jq_transform", "query": "range(10)"}]`, Limits{MaxRows: 5},
			`step 0 (jq_transform): query "range(10)" emits more than 5 values (the limit): use first, limit(n; ...) or a narrower select`},
		{"jq time", `[{"step": "jq_transform", "query": "def f: f; f"}]`, Limits{JQTimeout: 50 * 1e6},
			`step 0 (jq_transform): query "def f: f; f" ran past the limit of 50ms; make it do less (avoid recursion and large ranges)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(callOn(tt.steps)))
			require.NoError(t, err)
			env := memEnv(map[string]string{"in": rows})
			env.Limits = tt.limits
			_, err = Run(t.Context(), p, env)
			require.EqualError(t, err, tt.err)
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		p, err := Decode([]byte(callOn(`[{"step": "jq_transform", "query": "."}]`)))
		require.NoError(t, err)
		_, err = Run(ctx, p, memEnv(map[string]string{"in": rows}))
		require.ErrorIs(t, err, context.Canceled)
	})
}
