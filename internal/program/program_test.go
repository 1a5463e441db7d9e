package program

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newRunner(t testing.TB, o Options) *Runner {
	r := New(o)
	t.Cleanup(func() { r.Close() })
	return r
}

var (
	now   = time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	tools = []Tool{
		{Name: "add", Description: "Add two numbers.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
		{Name: "get", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)},
	}
)

// answer is what a test's tool answers a call with.
type answer func(c Call) (result string, errMsg string)

// add answers add calls with a+b and get calls with {"id": id}.
func add(c Call) (string, string) {
	var a struct {
		A, B float64
		ID   *int
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return "", err.Error()
	}
	if c.Tool == "get" {
		return fmt.Sprintf(`{"id":%d}`, *a.ID), ""
	}
	return strconv.FormatFloat(a.A+a.B, 'f', -1, 64), ""
}

// drive runs the program, answering each batch of pending calls, until it
// is Done or fails; it returns the last outcome, each Run's pending calls
// and the error.
func drive(t testing.TB, r *Runner, in Input, ans answer) (Outcome, [][]Call, error) {
	var batches [][]Call
	for range 100000 {
		out, err := r.Run(t.Context(), in)
		if err != nil || out.Done {
			return out, batches, err
		}
		batches = append(batches, out.Pending)
		for _, c := range out.Pending {
			res, msg := ans(c)
			in.Recorded = append(in.Recorded, Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Result: json.RawMessage(res), Error: msg})
		}
	}
	t.Fatal("the program never finished")
	return Outcome{}, nil, nil
}

func TestRunSequential(t *testing.T) {
	r := newRunner(t, Options{})
	src := `const a = await tools.add({b: 2, a: 1});
console.log("a is", a);
const b = await tools.add({a, b: 10});
console.warn({b});
const c = await tools.add({a: b, b: 100});
return {sum: c};`
	in := Input{Source: src, Tools: tools, Now: now}
	want := []Call{
		{N: 0, Tool: "add", Args: json.RawMessage(`{"a":1,"b":2}`)},
		{N: 1, Tool: "add", Args: json.RawMessage(`{"a":3,"b":10}`)},
		{N: 2, Tool: "add", Args: json.RawMessage(`{"a":13,"b":100}`)},
	}
	for i, w := range want {
		out, err := r.Run(t.Context(), in)
		require.NoError(t, err)
		require.False(t, out.Done)
		require.Equal(t, []Call{w}, out.Pending, "run %d", i)
		require.Equal(t, i+1, out.Calls)
		res, _ := add(w)
		in.Recorded = append(in.Recorded, Recorded{N: w.N, Tool: w.Tool, Args: w.Args, Result: json.RawMessage(res)})
	}
	out, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.True(t, out.Done)
	require.JSONEq(t, `{"sum":113}`, string(out.Value))
	require.Equal(t, "a is 3\nwarn: {\"b\":13}\n", out.Console)
	require.Equal(t, 3, out.Calls)
	require.Len(t, r.procs.Idle(), 1, "one warm child served every run")
}

func TestRunParallel(t *testing.T) {
	r := newRunner(t, Options{})
	src := `const rs = await Promise.all([...Array(10).keys()].map(async i => {
  try {
    return (await tools.get({id: i})).id;
  } catch (e) {
    return "failed: " + e.message;
  }
}));
return rs;`
	in := Input{Source: src, Tools: tools, Now: now}
	out, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Len(t, out.Pending, 10, "one batch: every call the program made before it waited")
	for i, c := range out.Pending {
		require.Equal(t, i, c.N)
		require.JSONEq(t, fmt.Sprintf(`{"id":%d}`, i), string(c.Args))
	}
	for _, c := range out.Pending[:5] {
		res, _ := add(c)
		in.Recorded = append(in.Recorded, Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Result: json.RawMessage(res)})
	}
	half, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, out.Pending[5:], half.Pending, "a batch is answered only whole: the recorded half waits with the rest")

	for _, c := range out.Pending[5:] {
		rec := Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Result: json.RawMessage(fmt.Sprintf(`{"id":%d}`, c.N))}
		if c.N == 7 {
			rec = Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Error: "order 7 not found"}
		}
		in.Recorded = append(in.Recorded, rec)
	}
	done, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.True(t, done.Done)
	require.JSONEq(t, `[0,1,2,3,4,5,6,"failed: order 7 not found",8,9]`, string(done.Value), "a rejected call throws in the program")
}

func TestRunReplayMismatch(t *testing.T) {
	r := newRunner(t, Options{})
	src := `const a = await tools.add({a: 1, b: 2});
return await tools.add({a, b: 3});`
	tests := []struct {
		name     string
		recorded []Recorded
		msg      string
	}{
		{name: "other arguments", recorded: []Recorded{{N: 0, Tool: "add", Args: json.RawMessage(`{"a":1,"b":5}`), Result: json.RawMessage(`6`)}},
			msg: `call 0 is add({"a":1,"b":2}), recorded as add({"a":1,"b":5})`},
		{name: "another tool", recorded: []Recorded{{N: 0, Tool: "get", Args: json.RawMessage(`{"a":1,"b":2}`), Result: json.RawMessage(`6`)}},
			msg: `call 0 is add({"a":1,"b":2}), recorded as get({"a":1,"b":2})`},
		{name: "more calls recorded than made", recorded: []Recorded{
			{N: 0, Tool: "add", Args: json.RawMessage(`{"b":2,"a":1}`), Result: json.RawMessage(`3`)},
			{N: 1, Tool: "add", Args: json.RawMessage(`{"a":3,"b":3}`), Result: json.RawMessage(`6`)},
			{N: 2, Tool: "add", Args: json.RawMessage(`{}`), Result: json.RawMessage(`0`)},
		}, msg: "it finished after 2 calls, but 3 were recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(t.Context(), Input{Source: src, Tools: tools, Recorded: tt.recorded})
			var pe *Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, KindReplay, pe.Kind)
			require.Contains(t, pe.Message, "the program made a different call on its re-run")
			require.Contains(t, pe.Message, tt.msg)
		})
	}
}

func TestRunErrors(t *testing.T) {
	r := newRunner(t, Options{})
	tests := []struct {
		name       string
		src        string
		kind       string
		msg        string
		line, col  int
		recordZero bool
		console    string
	}{
		{name: "syntax", src: "const x = 1;\nconst y = ;\nreturn x;", kind: KindSyntax, msg: "SyntaxError: Unexpected token ;", line: 2, col: 11},
		{name: "runtime", src: "const x = 1;\n\nnull.foo;", kind: KindRuntime, msg: "TypeError: Cannot read property 'foo' of", line: 3, col: 6},
		{name: "thrown after a call", src: "const x = await tools.add({a: 1, b: 1});\n  throw new Error(`boom ${x}`);", kind: KindRuntime, msg: "Error: boom 2", line: 2, col: 9, recordZero: true},
		{name: "a thrown string", src: `console.log("before"); throw "bad"`, kind: KindRuntime, msg: "bad", console: "before\n"},
		{name: "an unknown tool", src: "\nawait tools.nope({})", kind: KindRuntime, msg: "TypeError: Object has no member 'nope'", line: 2, col: 17},
		{name: "no require", src: `require("fs")`, kind: KindRuntime, msg: "ReferenceError: require is not defined", line: 1, col: 8},
		{name: "runaway recursion", src: "function f() { return f() + 1 }\nreturn f()", kind: KindRuntime, msg: "maximum call stack size"},
		{name: "a value that is not JSON", src: "return 10n", kind: KindRuntime, msg: "the program's return value is not JSON"},
		{name: "arguments that are not JSON", src: "const o = {}; o.o = o;\nawait tools.add(o)", kind: KindRuntime, msg: "tools.add: the arguments are not JSON", line: 2, col: 16},
		{name: "waiting forever", src: "await new Promise(() => {})", kind: KindRuntime, msg: "no tool call settles"},
		{name: "closing the wrapper", src: "}); (function() {", kind: KindSyntax},
		{name: "source too long", src: "//" + strings.Repeat("x", MaxSource), kind: KindLimit, msg: "limit: source (64 KiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Source: tt.src, Tools: tools}
			if tt.recordZero {
				in.Recorded = []Recorded{{N: 0, Tool: "add", Args: json.RawMessage(`{"a":1,"b":1}`), Result: json.RawMessage(`2`)}}
			}
			_, err := r.Run(t.Context(), in)
			var pe *Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tt.kind, pe.Kind, pe.Message)
			require.Contains(t, pe.Message, tt.msg)
			require.Equal(t, tt.line, pe.Line, "line")
			if tt.col > 0 {
				require.Equal(t, tt.col, pe.Column, "column")
			}
			require.Equal(t, tt.console, pe.Console, "the console output before the fault")
		})
	}
}

func TestRunDeterministic(t *testing.T) {
	r := newRunner(t, Options{})
	src := `await tools.add({a: 0, b: 0});
return [Date.now(), new Date().toISOString(), new Date().getHours(), Math.random(), Math.random()];`
	in := Input{Source: src, Tools: tools, Now: now, Seed: 42,
		Recorded: []Recorded{{N: 0, Tool: "add", Args: json.RawMessage(`{"a":0,"b":0}`), Result: json.RawMessage(`0`)}}}
	first, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.True(t, first.Done)
	var v []any
	require.NoError(t, json.Unmarshal(first.Value, &v))
	require.Equal(t, float64(now.UnixMilli()), v[0])
	require.Equal(t, "2026-11-26T09:30:00.000Z", v[1])
	require.Equal(t, float64(9), v[2], "local time is UTC")
	require.NotEqual(t, v[3], v[4])
	for range 3 {
		again, err := r.Run(t.Context(), in)
		require.NoError(t, err)
		require.Equal(t, string(first.Value), string(again.Value))
	}
	in.Seed = 43
	other, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.NotEqual(t, string(first.Value), string(other.Value), "the seed is the randomness")
}

// statm is the test process's resident set in bytes.
func statm(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// TestLimits runs the hostile programs of the issue. Each ends with its
// named limit, and afterwards the worker (this process) is where it was:
// its RSS within rssSlack, its goroutines within two (a child's reaper
// ends as the child is reaped), so no program's memory or goroutines
// stayed in the parent.
func TestLimits(t *testing.T) {
	const rssSlack = 32 << 20
	const budget = 128 << 20
	r := newRunner(t, Options{Memory: budget})
	// Warm up: a child and its reaper exist before the baseline.
	_, err := r.Run(t.Context(), Input{Source: "return 1"})
	require.NoError(t, err)
	runtime.GC()
	rss, goroutines := statm(t), runtime.NumGoroutine()

	tests := []struct {
		name   string
		src    string
		limits Limits
		limit  string
		msg    string
	}{
		{name: "a string doubled", src: `let s = "x"; for (;;) s = s + s;`, limits: Limits{Time: 30 * time.Second}, limit: LimitMemory, msg: "limit: memory (128 MiB)"},
		{name: "an array of arrays", src: `const a = []; for (;;) a.push(new Array(1000).fill(a.length));`, limits: Limits{Time: 30 * time.Second}, limit: LimitMemory, msg: "limit: memory (128 MiB)"},
		{name: "an infinite loop", src: `for (;;) {}`, limits: Limits{Time: 200 * time.Millisecond}, limit: LimitTime, msg: "limit: time (200ms)"},
		{name: "an infinite loop that catches", src: `for (;;) { try { for (;;) {} } catch (e) {} }`, limits: Limits{Time: 200 * time.Millisecond}, limit: LimitTime},
		// A builtin does not look at the interrupt: a backtracking regular
		// expression runs on until the parent kills its child, at the
		// time limit and a grace.
		{name: "a regular expression that backtracks", src: `return /^(?=(a+)+$)/.test("a".repeat(40) + "b")`, limits: Limits{Time: 200 * time.Millisecond}, limit: LimitTime, msg: "limit: time (200ms)"},
		{name: "10,000 calls at once", src: `await Promise.all([...Array(10000).keys()].map(i => tools.get({id: i})))`, limit: LimitCalls, msg: "limit: calls (1000)"},
		{name: "100 MB printed", src: `const line = "x".repeat(100); for (let i = 0; i < 1e6; i++) console.log(line);`, limit: LimitOutput, msg: "limit: output (1 MiB)"},
		// Ten times the limit in one line: the race detector's shadow makes
		// a larger string a memory bomb under a 128 MiB budget.
		{name: "10 MB in one line", src: `console.log("x".repeat(10e6))`, limits: Limits{Time: 30 * time.Second}, limit: LimitOutput},
		{name: "a return value over the limit", src: `return "x".repeat(2 << 20)`, limit: LimitOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(t.Context(), Input{Source: tt.src, Tools: tools, Limits: tt.limits})
			var pe *Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, KindLimit, pe.Kind, pe.Message)
			require.Equal(t, tt.limit, pe.Limit)
			require.Contains(t, pe.Message, tt.msg)
		})
	}

	// Sequential calls past the limit: the limit counts every call the
	// program makes from its start, recorded ones included.
	out, batches, err := drive(t, r, Input{Source: `for (let i = 0; ; i++) await tools.get({id: i})`, Tools: tools, Limits: Limits{Calls: 20}}, add)
	var pe *Error
	require.ErrorAs(t, err, &pe, "%+v", out)
	require.Equal(t, LimitCalls, pe.Limit)
	require.Len(t, batches, 20)

	_, err = r.Run(t.Context(), Input{Source: "return 1"})
	require.NoError(t, err, "a program runs after the limits")
	runtime.GC()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+2 }, 10*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", goroutines, runtime.NumGoroutine())
	after := statm(t)
	t.Logf("worker RSS %d MiB before, %d MiB after; goroutines %d before, %d after", rss>>20, after>>20, goroutines, runtime.NumGoroutine())
	require.Less(t, after-rss, int64(rssSlack))
}

func TestRunCallerErrors(t *testing.T) {
	r := newRunner(t, Options{})
	for name, in := range map[string]Input{
		"a tool name that is not an identifier": {Source: "return 1", Tools: []Tool{{Name: "get-order"}}},
		"a tool given twice":                    {Source: "return 1", Tools: []Tool{{Name: "a"}, {Name: "a"}}},
		"a recorded result that is not JSON":    {Source: "return 1", Recorded: []Recorded{{N: 0, Tool: "a", Result: json.RawMessage(`{`)}}},
		"an input that is not JSON":             {Source: "return 1", Input: json.RawMessage(`1); while(1) {} (`)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Run(t.Context(), in)
			require.Error(t, err)
			var pe *Error
			require.False(t, errors.As(err, &pe), "the caller's fault, not the program's: %v", err)
		})
	}
}

func TestRunInput(t *testing.T) {
	r := newRunner(t, Options{})
	out, err := r.Run(t.Context(), Input{Source: "return {n: input.items.length, none: typeof nothing}", Input: json.RawMessage(`{"items":[1,2,3]}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"n":3,"none":"undefined"}`, string(out.Value))
	out, err = r.Run(t.Context(), Input{Source: "return input"})
	require.NoError(t, err)
	require.Equal(t, "null", string(out.Value))
}

func TestDeclarations(t *testing.T) {
	got := Declarations([]Tool{
		{Name: "get_order", Description: "Look up an\norder. */ x", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The order id."},"expand":{"type":"boolean"},"tags":{"type":"array","items":{"enum":["a","b"]}},"my-key":{"type":["integer","null"]}},"required":["id"]}`)},
		{Name: "ping"},
	})
	require.Equal(t, `declare const tools: {
  /** Look up an order. * / x */
  get_order(args: { expand?: boolean; /** The order id. */ id: string; "my-key"?: number | null; tags?: ("a" | "b")[] }): Promise<any>;
  ping(args: any): Promise<any>;
};
`, got)
}

func TestRunCancel(t *testing.T) {
	r := newRunner(t, Options{Concurrency: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := r.Run(ctx, Input{Source: "for (;;) {}", Limits: Limits{Time: time.Minute}})
	require.ErrorIs(t, err, context.DeadlineExceeded, "the context's end is the runner's error, not the program's")
	var pe *Error
	require.False(t, errors.As(err, &pe))
	require.Empty(t, r.procs.Idle(), "the child was killed")
	out, err := r.Run(t.Context(), Input{Source: "return 2"})
	require.NoError(t, err)
	require.Equal(t, "2", string(out.Value))
}

func TestRunConcurrency(t *testing.T) {
	r := newRunner(t, Options{Concurrency: 1})
	busy := make(chan error)
	go func() {
		_, err := r.Run(t.Context(), Input{Source: "for (;;) {}", Limits: Limits{Time: 500 * time.Millisecond}})
		busy <- err
	}()
	require.Eventually(t, func() bool { return r.procs.Busy() == 1 }, 10*time.Second, time.Millisecond)
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := r.Run(short, Input{Source: "return 1"})
	require.ErrorIs(t, err, context.DeadlineExceeded, "one program at a time: the second waited for the slot")
	var pe *Error
	require.ErrorAs(t, <-busy, &pe)
	require.Equal(t, LimitTime, pe.Limit)
	out, err := r.Run(t.Context(), Input{Source: "return 1"})
	require.NoError(t, err)
	require.True(t, out.Done)
}

// TestRunRead: data.read waits like a call, with the calls of its batch,
// and takes a ref or a result that carries one; reads do not number
// calls; a read's error rejects its promise; reading more than the limit
// ends the program, whatever the order of its reads.
func TestRunRead(t *testing.T) {
	r := newRunner(t, Options{})
	src := `const got = await tools.get({id: 7});
const [rows, again, n] = await Promise.all([data.read({ref: "cas://a", type: "dataset"}), data.read("cas://a"), tools.add({a: 1, b: 2})]);
let missing;
try { await data.read("cas://gone"); } catch (e) { missing = e.message; }
return {got, rows: rows.length, same: again[1].id, n, missing};`
	in := Input{Source: src, Tools: tools, Now: now}
	out, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, []Call{{N: 0, Tool: "get", Args: json.RawMessage(`{"id":7}`)}}, out.Pending)
	require.Empty(t, out.Reads)
	in.Recorded = append(in.Recorded, Recorded{N: 0, Tool: "get", Args: out.Pending[0].Args, Result: json.RawMessage(`{"id":7}`)})

	out, err = r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, []Call{{N: 1, Tool: "add", Args: json.RawMessage(`{"a":1,"b":2}`)}}, out.Pending, "a read does not take a call's number")
	require.Equal(t, []string{"cas://a"}, out.Reads, "a ref read twice is read once")
	in.Reads = append(in.Reads, Read{Ref: "cas://a", Data: json.RawMessage(`[{"id":1},{"id":2}]`)})
	out, err = r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Len(t, out.Pending, 1)
	require.Empty(t, out.Reads)
	in.Recorded = append(in.Recorded, Recorded{N: 1, Tool: "add", Args: out.Pending[0].Args, Result: json.RawMessage(`3`)})

	out, err = r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Empty(t, out.Pending)
	require.Equal(t, []string{"cas://gone"}, out.Reads)
	in.Reads = append(in.Reads, Read{Ref: "cas://gone", Error: "data.read: no data at cas://gone"})
	out, err = r.Run(t.Context(), in)
	require.NoError(t, err)
	require.True(t, out.Done)
	require.JSONEq(t, `{"got":{"id":7},"rows":2,"same":2,"n":3,"missing":"data.read: no data at cas://gone"}`, string(out.Value))
	require.Equal(t, 2, out.Calls)

	t.Run("not a ref", func(t *testing.T) {
		_, err := r.Run(t.Context(), Input{Source: `return await data.read({id: 1});`})
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, KindRuntime, pe.Kind)
		require.Contains(t, pe.Message, "TypeError: data.read: pass a ref")
	})
	t.Run("over the limit", func(t *testing.T) {
		big := json.RawMessage(`"` + strings.Repeat("x", 600) + `"`)
		// The second read the program makes is the first the caller
		// kept back: the limit holds whatever the order.
		in := Input{Source: `const a = await data.read("cas://b"); return (await data.read("cas://a")).length;`, Limits: Limits{Read: 1000},
			Reads: []Read{{Ref: "cas://a", Data: big}, {Ref: "cas://b", Data: big}}}
		_, err := r.Run(t.Context(), in)
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, KindLimit, pe.Kind)
		require.Equal(t, LimitRead, pe.Limit)
		require.Contains(t, pe.Message, `limit: read (1000 bytes): data.read("cas://b") is 602 bytes of JSON`)
	})
	t.Run("too many refs", func(t *testing.T) {
		_, err := r.Run(t.Context(), Input{Source: `for (let i = 0; i <= 100; i++) { data.read("cas://" + i); }`})
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, LimitRead, pe.Limit)
		require.Contains(t, pe.Message, "limit: read (100 refs)")
	})
}
