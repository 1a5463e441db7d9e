package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestJQTransform(t *testing.T) {
	env := `{"count": 3, "items": [{"id": 1, "price": 50}, {"id": 2, "price": 150}, {"id": 3, "price": 80}]}`
	jq := func(q string) string {
		b, _ := json.Marshal(q)
		return `[{"step": "jq_transform", "query": ` + string(b) + `}]`
	}
	runCases(t, []stepCase{
		{name: "pick the array", input: env, steps: jq(".items | map(.id)"), want: `[1, 2, 3]`},
		{name: "several outputs make an array", input: env, steps: jq(".items[] | select(.price < 100)"),
			want: `[{"id": 1, "price": 50}, {"id": 3, "price": 80}]`},
		{name: "one output is itself", input: env, steps: jq(".items[] | select(.price > 100)"), want: `{"id": 2, "price": 150}`},
		{name: "no output is an empty table", input: env, steps: jq(".items[] | select(.price > 1000)"), want: `[]`},
		{name: "envelope fields stay readable", input: env, steps: jq(".count"), want: `3`},
		{name: "a table is an array", input: `[{"p": 2}, {"p": 3}]`, steps: jq("map(.p) | add"), want: `5`},
		{name: "then a table step", input: env, steps: `[{"step": "jq_transform", "query": "[.items[] | {id, cheap: (.price < 100)}]"}, {"step": "table_filter", "condition": {"field": "cheap", "op": "=", "value": true}}]`,
			want: `[{"id": 1, "cheap": true}, {"id": 3, "cheap": true}]`},
		{name: "big integers survive", input: `[{"id": 9007199254740993}, {"id": 123456789012345678901234567890}]`, steps: jq("map(.id)"),
			want: `[9007199254740993, 123456789012345678901234567890]`},
		{name: "NaN and infinities as jq writes them", input: `null`, steps: jq("[nan, infinite, -infinite]"),
			want: `[null, 1.7976931348623157e+308, -1.7976931348623157e+308]`},
		{name: "no environment", input: `null`, steps: jq("[$ENV, env] | map(length)"), want: `[0, 0]`},
		{name: "halt stops quietly", input: `null`, steps: jq("1, halt, 2"), want: `1`},
		{name: "runtime error", input: `[{"x": "abc"}]`, steps: jq(".[] | .x.y"),
			err: `step 0 (jq_transform): query ".[] | .x.y": expected an object but got: string ("abc")`},
		{name: "error()", input: `null`, steps: jq(`error("boom")`), err: `step 0 (jq_transform): query "error(\"boom\")": error: boom`},
		{name: "halt_error", input: `null`, steps: jq(`"stop" | halt_error`), err: `step 0 (jq_transform): query "\"stop\" | halt_error": halt error: stop`},
	}, nil)
}

// jqRun runs one jq_transform over input with small limits, as the fuzz
// target does.
func jqRun(ctx context.Context, query string, input any) (Result, error) {
	p := Pipeline{SessionID: "f", InputRef: "in", Steps: []Step{{Op: OpJQTransform, Query: query}}}
	v, err := ValueOf(input)
	if err != nil {
		return Result{}, err
	}
	return Run(ctx, p, Env{
		Load:   func(context.Context, string) (Value, error) { return v, nil },
		Limits: Limits{MaxRows: 1000, MaxBytes: 1 << 20, JQTimeout: 200 * time.Millisecond},
	})
}

// FuzzJQTransform: any query over any JSON input ends, within its limits,
// with a value that encodes as JSON or an error for the model.
func FuzzJQTransform(f *testing.F) {
	for _, s := range []struct{ query, input string }{
		{".items[] | select(.price < 100)", `{"items": [{"price": 50}, {"price": 150}]}`},
		{"map(.price) | add / length", `[{"price": 1}, {"price": 2.5}]`},
		{"[.[] | {id, n: (.name | ascii_downcase)}]", `[{"id": 1, "name": "A"}]`},
		{"group_by(.k) | map({k: .[0].k, n: length})", `[{"k": 1}, {"k": 2}, {"k": 1}]`},
		{"to_entries | map(.key)", `{"b": 1, "a": 2}`},
		{"[paths]", `{"a": [1, {"b": null}]}`},
		{"[limit(5; repeat(1))]", `null`},
		{"[range(10)] | .[2:4]", `null`},
		{`.s | test("a+"; "x")`, `{"s": "caaat"}`},
		{`.s | sub("(?<x>a)"; "\(.x)b")`, `{"s": "cat"}`},
		{"tojson | fromjson", `{"a": [1, 2, {"b": "c"}]}`},
		{"[nan, infinite] | tostring", `null`},
		{".[0] = 1", `[]`},
		{"reduce range(100) as $i ([]; [.])", `null`},
		{"def f: f; f", `null`},
		{"@base64 | @base64d", `"hello"`},
		{"now | todate", `null`},
		{`"2024-03-01" | strptime("%Y-%m-%d") | mktime`, `null`},
		{"input", `null`},
		{".a.b.c", `{"a": 1}`},
		{"", `null`},
	} {
		f.Add(s.query, s.input)
	}
	f.Fuzz(func(t *testing.T, query, input string) {
		var in any
		dec := json.NewDecoder(strings.NewReader(input))
		dec.UseNumber()
		if dec.Decode(&in) != nil {
			return
		}
		res, err := jqRun(t.Context(), query, in)
		if err != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "%v", err)
			return
		}
		b, err := json.Marshal(res.Value)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), 2<<20, "the size estimate is near the real size")
		_, err = json.Marshal(res.Preview(3))
		require.NoError(t, err)
	})
}
