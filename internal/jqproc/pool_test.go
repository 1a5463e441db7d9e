package jqproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/childproc"
)

// collect runs prog and returns its outputs and its error.
func collect(ctx context.Context, p *Pool, prog Program) ([]any, error) {
	var out []any
	for v, err := range p.Run(ctx, prog) {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func newPool(t testing.TB, o Options) *Pool {
	p := New(o)
	t.Cleanup(func() { p.Close() })
	return p
}

func idle(p *Pool) []*childproc.Proc { return p.procs.Idle() }

func TestRun(t *testing.T) {
	big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	items := map[string]any{"count": json.Number("3"), "items": []any{
		map[string]any{"id": json.Number("1"), "price": json.Number("50")},
		map[string]any{"id": json.Number("2"), "price": json.Number("150")},
	}}
	tests := []struct {
		name  string
		query string
		input any
		want  []any
		err   string
	}{
		{name: "outputs in order, gojq's types", query: ".items[] | .id, .price * 2", input: items,
			want: []any{json.Number("1"), 100, json.Number("2"), 300}},
		{name: "input numbers are passed through", query: ".count", input: items, want: []any{json.Number("3")}},
		{name: "a table is an array", query: "map(.a)", input: []map[string]any{{"a": "x"}, {"a": int64(2)}}, want: []any{[]any{"x", 2}}},
		{name: "floats, big integers, NaN and infinities as gojq gives them", query: "1.5, 123456789012345678901234567890, nan, infinite, -infinite",
			want: []any{1.5, big1, math.NaN(), math.Inf(1), math.Inf(-1)}},
		{name: "strings and objects", query: `{s: "é\u0000\"x", n: null, t: true, a: []}`,
			want: []any{map[string]any{"s": "é\x00\"x", "n": nil, "t": true, "a": []any{}}}},
		{name: "no output", query: "empty", want: nil},
		{name: "halt stops quietly", query: "1, halt, 2", want: []any{1}},
		{name: "the program's error", query: `1, error("boom")`, want: []any{1}, err: "error: boom"},
		{name: "halt_error", query: `"stop" | halt_error`, err: "halt error: stop"},
		{name: "a type error", query: ".x.y", input: map[string]any{"x": "abc"}, err: `expected an object but got: string ("abc")`},
		{name: "no environment", query: "[$ENV, env] | map(length)", want: []any{[]any{0, 0}}},
		{name: "a query that does not compile", query: "selct(.x)", err: "function not defined: selct/1"},
		{name: "an output nested too deep", query: "reduce range(600) as $i (0; [.])", err: "an output is nested too deep: output is nested more than 512 levels deep"},
		{name: "a long error message is cut", query: `error("x" * 100000)`, err: "error: " + strings.Repeat("x", maxMessage-len("error: ")) + "…"},
	}
	p := newPool(t, Options{Memory: 64 << 20})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := collect(t.Context(), p, Program{Query: tt.query, Input: tt.input, Timeout: 10 * time.Second})
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			require.Len(t, got, len(tt.want))
			for i := range tt.want {
				require.True(t, same(tt.want[i], got[i]), "output %d: want %#v, got %#v", i, tt.want[i], got[i])
			}
		})
	}
	require.Len(t, idle(p), 1, "one child served every run: errors of the program leave it in step")
}

// same compares values as the wire keeps them: types and NaN included.
func same(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !same(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// The jq bombs of the hostile-tenant review, and one allocation too large
// for the budget at once.
var bombs = []string{
	`reduce range(29) as $i ("a"; . + .)`,
	`def f: [f]; f`,
	`[range(1e9)]`,
	`"abc" * 100000000`,
}

// status reads a size from /proc/self/status, in bytes.
func status(t *testing.T, key string) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// childrenPeakRSS is the largest peak RSS of the children this process
// has reaped.
func childrenPeakRSS(t *testing.T) int64 {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return ru.Maxrss << 10 // KiB on Linux
}

// restingRSS is the RSS of a child that has started and run nothing: what
// the executable and the runtime take before a program does anything.
func restingRSS(t *testing.T, memory int64) int64 {
	c, err := start(t.Context(), memory)
	require.NoError(t, err)
	defer c.close()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Peak RSS bounds. A child's peak is its budget (and, under the race
// detector, the shadow of it), plus what it held at rest (the executable's
// pages and the runtime's start), plus childSlack: the regions the runtime
// mapped at start, before the cap, which the heap fills as it grows (the
// first heap arena and its metadata; up to 24 MiB over budget and rest
// was measured). The parent holds no program's memory: its peak may grow
// by the frames and goroutines of the runs, for which parentSlack is
// ample (a bomb sends no output).
const (
	childSlack  = 32 << 20
	parentSlack = 32 << 20
)

// childBound is the most a child of the budget may peak at.
func childBound(budget, resting int64) int64 {
	return budget*(1+raceShadow) + resting + childSlack
}

// looping is a program that sends one output and then loops until
// killed. The output is over twice the child's write buffer, so that it
// is written through at once: the child flushes smaller ones when the
// buffer fills or the run ends.
const looping = `("x" * 200000), (def f: f; f)`

func TestMemoryBudget(t *testing.T) {
	const budget = 96 << 20
	p := newPool(t, Options{Memory: budget})
	resting := restingRSS(t, budget)
	before := status(t, "VmHWM")
	for _, q := range bombs {
		t.Run(q, func(t *testing.T) {
			_, err := collect(t.Context(), p, Program{Query: q, Timeout: 30 * time.Second})
			require.ErrorIs(t, err, ErrMemory)
			require.Empty(t, idle(p), "a child that ran out of memory is discarded")
		})
	}
	children, parent := childrenPeakRSS(t), status(t, "VmHWM")-before
	t.Logf("budget %d MiB; child at rest %d MiB, children's peak %d MiB; parent's peak grew %d MiB", budget>>20, resting>>20, children>>20, parent>>20)
	require.Less(t, children, childBound(budget, resting))
	require.Less(t, parent, int64(parentSlack))

	out, err := collect(t.Context(), p, Program{Query: `[limit(100000; repeat("x"))] | length`, Timeout: 30 * time.Second})
	require.NoError(t, err, "a program within the budget runs after the bombs")
	require.Equal(t, []any{100000}, out)
}

func TestMemoryBudgetInParallel(t *testing.T) {
	const budget = 96 << 20
	p := newPool(t, Options{Memory: budget, Concurrency: 4})
	resting := restingRSS(t, budget)
	before := status(t, "VmHWM")
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = collect(t.Context(), p, Program{Query: bombs[i%2], Timeout: 30 * time.Second})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, ErrMemory)
	}
	children, parent := childrenPeakRSS(t), status(t, "VmHWM")-before
	t.Logf("4 at once, budget %d MiB each; child at rest %d MiB, children's peak %d MiB; parent's peak grew %d MiB", budget>>20, resting>>20, children>>20, parent>>20)
	require.Less(t, children, childBound(budget, resting))
	require.Less(t, parent, int64(parentSlack))
}

func TestTimeoutKillsTheChild(t *testing.T) {
	p := newPool(t, Options{})
	_, err := collect(t.Context(), p, Program{Query: "def f: f; f", Timeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrTimeout)
	// The child's own deadline (a second later) would have kept it for the
	// next run; the parent killed it instead.
	require.Empty(t, idle(p))
	out, err := collect(t.Context(), p, Program{Query: "1", Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.Equal(t, []any{1}, out)
}

func TestCancelKillsTheChild(t *testing.T) {
	p := newPool(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var err error
	for v, e := range p.Run(ctx, Program{Query: looping}) {
		if v != nil {
			cancel() // the child is looping now
		}
		err = e
	}
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, idle(p))
}

func TestBreakKillsTheChild(t *testing.T) {
	p := newPool(t, Options{})
	n := 0
	for _, err := range p.Run(t.Context(), Program{Query: "repeat(1)", Timeout: time.Minute}) {
		require.NoError(t, err)
		if n++; n == 3 {
			break
		}
	}
	require.Empty(t, idle(p), "a child that was still sending is not reused")
	require.Zero(t, p.procs.Busy())
}

func TestConcurrencyCap(t *testing.T) {
	const n = 2
	p := newPool(t, Options{Concurrency: n})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	running := make(chan struct{}, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for v := range p.Run(ctx, Program{Query: looping}) {
				if v != nil {
					running <- struct{}{}
				}
			}
		})
	}
	for range n {
		<-running
	}

	short, stop := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer stop()
	_, err := collect(short, p, Program{Query: "1"})
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	var out []any
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		out, err = collect(t.Context(), p, Program{Query: "1"})
	}()
	require.Never(t, func() bool {
		select {
		case <-waited:
			return true
		default:
			return false
		}
	}, 200*time.Millisecond, 10*time.Millisecond, "a program ran while the slots were taken")
	cancel()
	wg.Wait()
	<-waited
	require.NoError(t, err)
	require.Equal(t, []any{1}, out)
}

func TestChildReuse(t *testing.T) {
	// The budget is large for the race detector, which maps about eight
	// times each new heap mapping in shadow, and the cap counts that (see
	// capMemory); the test touches less than a tenth of it.
	p := newPool(t, Options{Memory: 4 << 30})
	run := func(q string) error {
		_, err := collect(t.Context(), p, Program{Query: q, Timeout: 30 * time.Second})
		return err
	}
	require.NoError(t, run("1"))
	first := idle(p)
	require.Len(t, first, 1)
	require.NoError(t, run("2"))
	require.Equal(t, first, idle(p), "a warm child serves the next run")

	require.NoError(t, run(`"x" * 70000000 | length`))
	require.Empty(t, idle(p), "a child whose heap grew past retireBytes retires")

	require.NoError(t, run("1"))
	c := idle(p)[0]
	c.Kill()
	<-c.Exited
	require.NoError(t, run("1"), "an idle child that died is passed over")
	require.Len(t, idle(p), 1)
	require.NotSame(t, c, idle(p)[0])
}

func TestDeathCause(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		stderr string
		want   error
		msg    string
	}{
		{"runtime out of memory", 2, "fatal error: runtime: out of memory\n\nruntime stack:\n", ErrMemory, ""},
		{"large allocation refused", 2, "runtime: out of memory: cannot allocate 134217728-byte block (138117120 in use)\nfatal error: out of memory\n", ErrMemory, ""},
		{"arena metadata", 2, "fatal error: out of memory allocating heap arena metadata\n", ErrMemory, ""},
		{"mmap refused", 2, "fatal error: runtime: cannot allocate memory\n", ErrMemory, ""},
		{"collector crashed for want of memory", 2, "SIGSEGV: segmentation violation\nPC=0x432b9d m=2 sigcode=1 addr=0x0\n", ErrMemory, ""},
		{"race detector's allocator", 66, "==30151==ERROR: ThreadSanitizer failed to allocate 0x8000000 (134217728) bytes\n", ErrMemory, ""},
		{"killed by the OOM killer", -1, "", ErrMemory, ""},
		{"a slice too large to make", 2, "panic: runtime error: makeslice: len out of range\n\ngoroutine 1", ErrMemory, ""},
		{"gojq panicked", 2, "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\n", ErrCrashed,
			"the jq process crashed: panic: runtime error: index out of range [3] with length 3"},
		{"the child's own complaint", exitSetup, "jqproc: cap memory: setrlimit RLIMIT_DATA 1: operation not permitted\n", nil,
			"jq process failed: jqproc: cap memory: setrlimit RLIMIT_DATA 1: operation not permitted"},
		{"a clean exit mid-run", 0, "", nil, "jq process exited mid-run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := deathCause(tt.code, tt.stderr)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
			} else {
				require.False(t, errors.Is(err, ErrMemory))
			}
			if tt.msg != "" {
				require.EqualError(t, err, tt.msg)
			}
		})
	}
}
