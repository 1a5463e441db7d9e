package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/jqproc"
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

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// runJQ runs one jq_transform over null with the pool.
func runJQ(ctx context.Context, pool *jqproc.Pool, query string, limits Limits) error {
	p := Pipeline{InputRef: "in", Steps: []Step{{Op: OpJQTransform, Query: query}}}
	_, err := Run(ctx, p, Env{
		Load:   func(context.Context, string) (Value, error) { return Value{Kind: KindDocument}, nil },
		Limits: limits,
		JQ:     pool,
	})
	return err
}

// TestJQMemoryBudget: the jq bombs of the hostile review, one after
// another and four at once, end with an error the model can act on, and
// the process that runs the pipeline does not grow: the memory was the
// children's, and they are gone (internal/jqproc's tests bound their
// peak). The margin is for the runs' goroutines and frames: a bomb sends
// no output, so 32 MiB is ample; before the budget, one bomb took 1 to
// 2.4 GB of this process.
func TestJQMemoryBudget(t *testing.T) {
	pool := jqproc.New(jqproc.Options{Memory: 64 << 20, Concurrency: 4})
	t.Cleanup(func() { pool.Close() })
	bombs := []string{`reduce range(29) as $i ("a"; . + .)`, `def f: [f]; f`}
	want := func(q string) string {
		return fmt.Sprintf("step 0 (jq_transform): query %q used more than 64 MiB of memory (the per-call budget); make it build less: no repeated doubling, deep recursion or large ranges", q)
	}
	limits := Limits{JQTimeout: time.Minute, StepTimeout: time.Minute}
	before := peakRSS(t)
	for _, q := range bombs {
		err := runJQ(t.Context(), pool, q, limits)
		require.EqualError(t, err, want(q))
		require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
	}
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = runJQ(t.Context(), pool, bombs[i%2], limits) })
	}
	wg.Wait()
	for i, err := range errs {
		require.EqualError(t, err, want(bombs[i%2]))
	}
	grew := peakRSS(t) - before
	t.Logf("peak RSS %d MiB; the bombs added %d MiB", peakRSS(t)>>20, grew>>20)
	require.Less(t, grew, int64(32<<20))

	require.NoError(t, runJQ(t.Context(), pool, `[limit(1000; repeat("x"))] | length`, limits), "the pool runs programs after the bombs")
}

// TestJQBusy: a jq_transform that finds every slot taken waits, and when
// its step's time runs out waiting it says so, as an error a retry may
// fix, not as a program that ran too long.
func TestJQBusy(t *testing.T) {
	pool := jqproc.New(jqproc.Options{Concurrency: 1})
	t.Cleanup(func() { pool.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	running := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// One output over twice the child's write buffer, so that it
		// arrives at once, then a loop.
		for v := range pool.Run(ctx, jqproc.Program{Query: `("x" * 200000), (def f: f; f)`}) {
			if v != nil {
				close(running)
			}
		}
	})
	<-running
	err := runJQ(t.Context(), pool, ".", Limits{StepTimeout: 100 * time.Millisecond})
	require.Equal(t, agent.CodeUnavailable, agent.ErrorCode(err))
	require.Regexp(t, `^step 0 \(jq_transform\): no jq slot came free in \d+ms \(this process runs 1 jq programs at once\): context deadline exceeded$`, err.Error())
	cancel()
	wg.Wait()
	require.NoError(t, runJQ(t.Context(), pool, ".", Limits{}))
}
