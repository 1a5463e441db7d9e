// Command floor measures what Temporal alone costs on a running stack, for
// comparison with a streamed agent turn on the same stack: an empty
// workflow, and a workflow with the same shape of workflow tasks, local
// activities, activities, search attribute upsert and timer as a streamed
// one-tool turn, with no work in any of them. A turn's model call streams
// live first and signals nothing; -signals adds signals for the shape of
// a turn that signals its batches (one followed through Workflow Streams),
// and -local-model makes its model calls local activities, the shape of a
// turn on the defaults. The third workflow is the least a durable turn can
// be: its two model calls as local activities and nothing else. Each is
// started with eager start by a client that runs the worker, and awaited
// with a long poll on its result, the way the gateway starts and follows a
// turn. Besides each workflow's latency and throughput it prints how long
// after the start the first model-like step began (first_call_p50_ms):
// what Temporal alone puts before a turn's first model request.
//
// Nothing imports it; of the process it takes only the Temporal
// connection's settings (internal/server), and it registers none of
// agentflow's workflows or activities: the floor is Temporal's alone.
//
// It prints one JSON line per workflow in the format of
// ../shared/peers/run, which `go tool task peers` runs on the stack the
// peers' run then measures agentflow on:
//
//	go run ./internal/bench/floor -address 127.0.0.1:7233 -seq 50 -conc 32 -total 320
//
// With -report it reads those lines and agentflow's line of the peers'
// output and prints the floor beside agentflow, as ratios:
//
//	go run ./internal/bench/floor -report floor.jsonl -against agentflow.jsonl
//
// With -pairs it measures the floor and agentflow's streamed turn through
// the gateway's gRPC API alternately, that many times each, and prints
// every pair's ratios and their medians (`go tool task floor:pairs`): one
// run of either moves by a quarter from one minute to the next on a
// shared machine, so a ratio of single runs says little.
//
// Before measuring, it runs turn-shaped workflows for -warmup (15 s), so
// that a stack just started is measured settled. With a paced model,
// -model-url has the model-like activities wait as long as that model
// takes for the turn's two calls, so that the floor does the same waits
// as the turn it is compared with.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/server"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

type options struct {
	address, namespace, taskQueue string
	seq, conc, total, signals     int
	localModel                    bool
	pollers                       int
	warmup                        time.Duration
	eager                         bool
	modelTimes                    []time.Duration
	requests                      bool          // print the sequential runs' server requests
	timed                         *requestTimes // the client's requests, timed
}

func run() error {
	var o options
	var report, against string
	flag.StringVar(&report, "report", "", "print the floor (JSON lines in this file) beside the line in -against, instead of measuring")
	flag.StringVar(&against, "against", "", "with -report: agentflow's line of ../shared/peers/run's output")
	flag.StringVar(&o.address, "address", "127.0.0.1:7233", "Temporal frontend")
	flag.StringVar(&o.namespace, "namespace", "default", "namespace")
	flag.StringVar(&o.taskQueue, "task-queue", "floor", "task queue of the floor's own worker")
	flag.IntVar(&o.seq, "seq", 50, "workflows one after another (latency)")
	flag.IntVar(&o.conc, "conc", 32, "concurrent callers (throughput)")
	flag.IntVar(&o.total, "total", 320, "workflows run by the concurrent callers")
	flag.IntVar(&o.signals, "signals", 0, "signals the second model-like activity sends (a streamed reply's token batches, when they are signalled)")
	flag.BoolVar(&o.localModel, "local-model", false, "run the model-like steps as local activities, the shape of a turn on the defaults (model_execution: local), instead of activities; -signals must be 0")
	flag.IntVar(&o.pollers, "pollers", 4, "workflow and activity pollers, as agentflow's worker runs by default")
	flag.BoolVar(&o.eager, "eager", true, "start workflows eagerly, as the gateway of `task up` does (it runs in the worker's process); false as a gateway process of its own does (starter up --production)")
	modelURL := flag.String("model-url", "", "instead of -model-ms: time the turn's two calls against this OpenAI-compatible base URL (the peers' fake model, $FAKEOAI) and wait as long as each took")
	modelMS := flag.String("model-ms", "", "the model-like activities' durations in ms, comma-separated, one per call (e.g. 330,630 for the peers' model at TTFT_MS=300 TOKEN_MS=20); empty: no wait")
	flag.DurationVar(&o.warmup, "warmup", 15*time.Second, "run turn-shaped workflows by -conc callers this long before measuring, so that a stack just started is measured settled")
	only := flag.String("only", "", "measure only this workflow: empty, turn or calls (default all three)")
	pairs := flag.Int("pairs", 0, "instead: measure the turn-shaped floor and an agentflow turn through -gateway, alternately, this many times each, and print each pair's ratios and their medians")
	flag.BoolVar(&o.requests, "requests", false, "print to stderr, for the workflows run one after another, the server requests each made and how long the server took to answer each kind (agentflow's worker reports the same of its turns as temporal_request_latency; `go tool task profile` prints it)")
	gateway := flag.String("gateway", "127.0.0.1:50051", "with -pairs: agentflow's gRPC API")
	token := flag.String("token", "dev-token", "with -pairs: its bearer token")
	flag.Parse()
	if report != "" {
		return printReport(os.Stdout, report, against)
	}
	for f := range strings.SplitSeq(*modelMS, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ms, err := strconv.Atoi(f)
		if err != nil || ms < 0 {
			return fmt.Errorf("-model-ms %q: want milliseconds, comma-separated", *modelMS)
		}
		o.modelTimes = append(o.modelTimes, time.Duration(ms)*time.Millisecond)
	}
	if *modelURL != "" {
		if len(o.modelTimes) > 0 {
			return errors.New("-model-url and -model-ms: give one")
		}
		times, err := timeModel(*modelURL)
		if err != nil {
			return err
		}
		o.modelTimes = times
	}
	if *pairs < 0 {
		return errors.New("-pairs must not be negative")
	}
	if *only != "" && *only != "empty" && *only != "turn" && *only != "calls" {
		return fmt.Errorf("-only %q: want empty, turn or calls", *only)
	}
	if o.localModel && o.signals > 0 {
		return errors.New("-local-model sends no signals: a local call holds its workflow task, so signals would wait for its end")
	}
	if o.seq < 1 || o.conc < 1 || o.total < 1 || o.signals < 0 || o.pollers < 2 || o.warmup < 0 {
		return errors.New("seq, conc, total and pollers (≥ 2) must be positive, signals and warmup not negative")
	}

	// Compressed as agentflow's server compresses its requests to the same
	// address: the floor is measured with the same client.
	compression, err := server.Compression(o.address, os.Getenv("AGENTFLOW_TEMPORAL_COMPRESSION"))
	if err != nil {
		return err
	}
	o.timed = &requestTimes{}
	c, err := client.Dial(client.Options{HostPort: o.address, Namespace: o.namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: compression,
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(o.timed.intercept)}}})
	if err != nil {
		return fmt.Errorf("dial %s: %w", o.address, err)
	}
	defer c.Close()
	w := worker.New(c, o.taskQueue, worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: o.pollers, MinimumNumberOfPollers: 2, MaximumNumberOfPollers: o.pollers,
		}),
		MaxConcurrentActivityTaskPollers: o.pollers,
	})
	w.RegisterWorkflowWithOptions(Empty, workflow.RegisterOptions{Name: "FloorEmpty"})
	w.RegisterWorkflowWithOptions(TurnShape, workflow.RegisterOptions{Name: "FloorTurnShape"})
	w.RegisterWorkflowWithOptions(ModelCalls, workflow.RegisterOptions{Name: "FloorModelCalls"})
	acts := &activities{client: c, times: o.modelTimes}
	w.RegisterActivityWithOptions(acts.Step, activity.RegisterOptions{Name: "FloorStep"})
	w.RegisterActivityWithOptions(acts.Model, activity.RegisterOptions{Name: "FloorModel"})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	// A stack just started is still busy with its own start (the dev
	// server's system workflows, cold caches): measured at once, the floor
	// came out a quarter slower than a minute later, which flattered
	// whatever was measured after it.
	if err := warm(context.Background(), c, o); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	if *pairs > 0 {
		return measurePairs(context.Background(), os.Stdout, c, o, *pairs, *gateway, *token)
	}

	for _, b := range []struct {
		mode     string
		workflow string
		args     []any
	}{
		{"empty workflow", "FloorEmpty", nil},
		{"turn shape", "FloorTurnShape", o.shapeArgs()},
		{"model calls", "FloorModelCalls", nil},
	} {
		if *only != "" && !strings.Contains(b.mode, *only) {
			continue
		}
		r, err := measure(context.Background(), c, o, b.workflow, b.args)
		if err != nil {
			return fmt.Errorf("%s: %w", b.mode, err)
		}
		r.Peer, r.Mode = "temporal floor", b.mode
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
	}
	return nil
}

// result is one line of ../shared/peers/run's output.
type result struct {
	Peer        string  `json:"peer"`
	Mode        string  `json:"mode"`
	P50         float64 `json:"turn_p50_ms"`
	P99         float64 `json:"turn_p99_ms"`
	Concurrency int     `json:"concurrency"`
	PerSecond   float64 `json:"turns_per_s"`
	Errors      int64   `json:"errors"`
	// FirstCall is the p50, over the runs one after another, of the time
	// from the client's start to the first model-like step's beginning:
	// what Temporal alone puts before a turn's first model request.
	FirstCall  float64 `json:"first_call_p50_ms,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
}

// printReport prints the floor's lines as a table, and agentflow's
// figures as multiples of the turn-shaped floor's.
func printReport(w io.Writer, floorFile, againstFile string) error {
	floor, err := readResults(floorFile)
	if err != nil {
		return err
	}
	against, err := readResults(againstFile)
	if err != nil {
		return err
	}
	var shape, af *result
	for i := range floor {
		if floor[i].Mode == "turn shape" {
			shape = &floor[i]
		}
	}
	if len(against) > 0 {
		af = &against[0]
	}
	fmt.Fprintln(w, "\n| Temporal alone, same stack | turn p50 ms | turn p99 ms | first model-like step p50 ms | turns/s | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range floor {
		first := "–"
		if r.FirstCall > 0 {
			first = fmt.Sprintf("%.1f", r.FirstCall)
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %.1f | %d |\n", r.Mode, r.P50, r.P99, first, r.PerSecond, r.Errors)
	}
	if shape == nil || af == nil || shape.P50 == 0 || shape.PerSecond == 0 {
		fmt.Fprintln(w, "(no agentflow line or no turn-shaped floor: no ratios)")
		return nil
	}
	fmt.Fprintf(w, "\nagentflow over the turn-shaped floor: p50 %.2f×, p99 %.2f×, turns/s %.2f× (floor %.1f/s, agentflow %.1f/s)\n",
		af.P50/shape.P50, af.P99/shape.P99, af.PerSecond/shape.PerSecond, shape.PerSecond, af.PerSecond)
	return nil
}

// readResults reads the JSON lines of a file that start with '{'.
func readResults(path string) ([]result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []result
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, nil
}

var counter atomic.Int64

// firstCalls times, while it is on, how long after its start each
// workflow's first model-like step began (result.FirstCall). The client
// and the worker share this process, so one clock times both ends.
var firstCalls struct {
	mu      sync.Mutex
	on      bool
	started map[string]time.Time // by workflow id
	ms      []float64
}

// startedNow notes that the workflow id is being started, when timing.
func startedNow(id string) {
	firstCalls.mu.Lock()
	defer firstCalls.mu.Unlock()
	if firstCalls.on {
		firstCalls.started[id] = time.Now()
	}
}

// firstCall times the first model-like step of the workflow id.
func firstCall(id string) {
	firstCalls.mu.Lock()
	defer firstCalls.mu.Unlock()
	if at, ok := firstCalls.started[id]; ok {
		firstCalls.ms = append(firstCalls.ms, float64(time.Since(at).Microseconds())/1000)
		delete(firstCalls.started, id)
	}
}

// timeFirstCalls starts timing first calls (on) or stops and returns
// what was timed, sorted.
func timeFirstCalls(on bool) []float64 {
	firstCalls.mu.Lock()
	defer firstCalls.mu.Unlock()
	firstCalls.on, firstCalls.started = on, map[string]time.Time{}
	ms := firstCalls.ms
	firstCalls.ms = nil
	slices.Sort(ms)
	return ms
}

// one starts a workflow and waits for its result.
func one(ctx context.Context, c client.Client, o options, name string, args []any) error {
	id := fmt.Sprintf("floor/%d/%d", os.Getpid(), counter.Add(1))
	startedNow(id)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                o.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(contract.SearchTenant.ValueSet("floor")),
		StaticSummary:            "floor",
		EnableEagerStart:         o.eager,
	}, name, args...)
	if err != nil {
		return err
	}
	// The gateway follows a turn with a long poll on its result, by its
	// run id (without one the SDK asks the server for it first, a request
	// the gateway does not make).
	return run.Get(ctx, nil)
}

// warm runs turn-shaped workflows by o.conc callers for o.warmup.
func warm(ctx context.Context, c client.Client, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.warmup)
	defer cancel()
	var g errgroup.Group
	for range o.conc {
		g.Go(func() error {
			for ctx.Err() == nil {
				if err := one(context.Background(), c, o, "FloorTurnShape", o.shapeArgs()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// measure runs 5 warm-up workflows, o.seq one after another, then o.total
// by o.conc callers.
func measure(ctx context.Context, c client.Client, o options, name string, args []any) (result, error) {
	return measureRuns(ctx, o, func(ctx context.Context) error { return one(ctx, c, o, name, args) })
}

// measureRuns is measure of any run: 5 warm-up runs, o.seq one after
// another, then o.total by o.conc callers.
func measureRuns(ctx context.Context, o options, one func(context.Context) error) (result, error) {
	for range 5 {
		if err := one(ctx); err != nil {
			return result{}, err
		}
	}
	lat := make([]float64, 0, o.seq)
	if o.requests {
		o.timed.start()
	}
	timeFirstCalls(true)
	for range o.seq {
		begin := time.Now()
		if err := one(ctx); err != nil {
			return result{}, err
		}
		lat = append(lat, float64(time.Since(begin).Microseconds())/1000)
	}
	var firstCallMS float64
	if ms := timeFirstCalls(false); len(ms) > 0 {
		firstCallMS = round(pct(ms, .5))
	}
	if o.requests {
		o.timed.print(os.Stderr, o.seq)
	}
	var left atomic.Int64
	left.Store(int64(o.total))
	var errs atomic.Int64
	var first sync.Once
	var firstErr string
	var wg sync.WaitGroup
	begin := time.Now()
	for range o.conc {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := one(ctx); err != nil {
					errs.Add(1)
					first.Do(func() { firstErr = err.Error() })
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(begin).Seconds()
	slices.Sort(lat)
	return result{
		P50: round(pct(lat, .5)), P99: round(pct(lat, .99)), Concurrency: o.conc,
		PerSecond: round(float64(o.total) / secs), Errors: errs.Load(), FirstError: firstErr, FirstCall: firstCallMS,
	}, nil
}

// requestTimes times the server's answers to the client's unary requests
// (long polls for tasks excepted), by method, while it is started.
type requestTimes struct {
	mu     sync.Mutex
	on     bool
	byKind map[string]*requestTime
}

type requestTime struct {
	n     int
	total time.Duration
}

func (r *requestTimes) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	begin := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	kind := method[strings.LastIndex(method, "/")+1:]
	if strings.HasPrefix(kind, "Poll") {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		t := r.byKind[kind]
		if t == nil {
			t = &requestTime{}
			r.byKind[kind] = t
		}
		t.n++
		t.total += time.Since(begin)
	}
	return err
}

func (r *requestTimes) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.byKind = true, map[string]*requestTime{}
}

// print stops the timing and prints each kind's count per run and mean.
func (r *requestTimes) print(w io.Writer, runs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	kinds := make([]string, 0, len(r.byKind))
	for k := range r.byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		t := r.byKind[k]
		fmt.Fprintf(w, "  %-36s %5.2f per workflow  %6.2f ms\n", k, float64(t.n)/float64(runs),
			float64(t.total.Microseconds())/1000/float64(t.n))
	}
}

// pct is the peers' percentile: the element at floor((n-1)·p).
func pct(sorted []float64, p float64) float64 { return sorted[int(float64(len(sorted)-1)*p)] }

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// shapeArgs are TurnShape's arguments for o.
func (o options) shapeArgs() []any { return []any{o.signals, o.localModel} }

// ModelCalls is the least a durable turn of the peers' shape can be on
// Temporal: its two model calls as local activities, nothing else — no
// routing, no tool, no result to store, no search attribute, no timer.
func ModelCalls(ctx workflow.Context) error {
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	for call := range 2 {
		if err := workflow.ExecuteLocalActivity(local, "FloorModel", id, call, 0).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// Empty is a workflow with nothing in it: one workflow task.
func Empty(workflow.Context) error { return nil }

// TurnShape has the tasks of a streamed turn with one local tool call and
// no work in them: two local steps (route, load the agent), the search
// attribute upsert, a timer for the turn's timeout, a model call that asks for the tool, the tool as a local
// step, a model call that streams its reply (as signals, when signals > 0),
// a local step that saves the result. With localModel the model calls are
// local activities too, as a turn's are on the defaults: the whole turn is
// then one workflow task.
func TurnShape(ctx workflow.Context, signals int, localModel bool) error {
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for range 2 {
		if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, contract.SearchTenant.ValueSet("floor"), contract.SearchAgent.ValueSet("floor")); err != nil {
		return err
	}
	tctx, cancelTimer := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, 10*time.Minute)
	_ = timer
	remote := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	tokens := workflow.GetSignalChannel(ctx, contract.SignalTokens)
	model := func(call, n int) error {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		if localModel {
			return workflow.ExecuteLocalActivity(local, "FloorModel", id, call, 0).Get(ctx, nil)
		}
		f := workflow.ExecuteActivity(remote, "FloorModel", id, call, n)
		done := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) { done = true })
		sel.AddReceive(tokens, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		for !done {
			sel.Select(ctx)
		}
		for tokens.ReceiveAsync(nil) {
		}
		return f.Get(ctx, nil)
	}
	if err := model(0, 0); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
		return err
	}
	if err := model(1, signals); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(local, "FloorStep").Get(ctx, nil); err != nil {
		return err
	}
	cancelTimer()
	return nil
}

type activities struct {
	client client.Client
	times  []time.Duration // how long each model call takes, by call (-model-ms)
}

// Step does nothing.
func (a *activities) Step(context.Context) error { return nil }

// Model takes as long as the call-th model call of -model-ms, and sends n
// signals to the workflow that called it, one after another, as a
// streaming model call sends its token batches.
func (a *activities) Model(ctx context.Context, workflowID string, call, n int) error {
	if call == 0 {
		firstCall(workflowID)
	}
	if call < len(a.times) {
		select {
		case <-time.After(a.times[call]):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range n {
		if err := a.client.SignalWorkflow(ctx, workflowID, "", contract.SignalTokens, "batch"); err != nil {
			return err
		}
	}
	return nil
}

// measurePairs measures the turn-shaped floor and agentflow's streamed
// turn (the peers' turn: a calculator call, then the answer) n times
// each, alternately, on the same stack. One run of either moves by a
// quarter from one minute to the next on a shared 2-core machine; pairs
// taken close together, and their median, say what one pair cannot.
func measurePairs(ctx context.Context, w io.Writer, c client.Client, o options, n int, gateway, token string) error {
	conn, err := grpc.NewClient(gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", gateway, err)
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	var turns atomic.Int64
	turn := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		job := fmt.Sprintf("pairs-%d-%d", os.Getpid(), turns.Add(1))
		r, err := grpcturn.Stream(ctx, api, &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"})
		if err != nil {
			return err
		}
		if r.Status != pb.Status_STATUS_COMPLETED || !strings.Contains(r.Text, "50") {
			return fmt.Errorf("job %s ended %s with %q", job, r.Status, r.Text)
		}
		return nil
	}
	var p50s, tputs []float64
	fmt.Fprintln(w, "| pair | floor p50 ms | agentflow p50 ms | p50 × | floor turns/s | agentflow turns/s | turns/s × |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i := range n {
		f, err := measure(ctx, c, o, "FloorTurnShape", o.shapeArgs())
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		a, err := measureRuns(actx, o, turn)
		if err != nil {
			return fmt.Errorf("agentflow: %w", err)
		}
		if f.Errors > 0 || a.Errors > 0 {
			return fmt.Errorf("pair %d: %d floor and %d agentflow errors (%s%s)", i+1, f.Errors, a.Errors, f.FirstError, a.FirstError)
		}
		p50s, tputs = append(p50s, a.P50/f.P50), append(tputs, a.PerSecond/f.PerSecond)
		fmt.Fprintf(w, "| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", i+1, f.P50, a.P50, a.P50/f.P50, f.PerSecond, a.PerSecond, a.PerSecond/f.PerSecond)
	}
	slices.Sort(p50s)
	slices.Sort(tputs)
	fmt.Fprintf(w, "\nmedian of %d pairs: agentflow's p50 %.2f× the floor's, its turns/s %.2f× (each pair: %d one after another, %d by %d callers)\n",
		n, median(p50s), median(tputs), o.seq, o.total, o.conc)
	return nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// timeModel times the turn's two model calls against an OpenAI-compatible
// server (a question that gets a tool call, then the tool's result that
// gets the answer), streamed as agentflow streams them, three times each,
// and returns each call's median.
func timeModel(baseURL string) ([]time.Duration, error) {
	const tools = `"tools":[{"type":"function","function":{"name":"calculator","parameters":{"type":"object","properties":{"expression":{"type":"string"}}}}}]`
	bodies := []string{
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"What is 12.5 * 4?"}],` + tools + `}`,
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"What is 12.5 * 4?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"12.5*4\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"50"}],` + tools + `}`,
	}
	var out []time.Duration
	for _, body := range bodies {
		var took []time.Duration
		for range 3 {
			begin := time.Now()
			resp, err := http.Post(strings.TrimSuffix(baseURL, "/")+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				return nil, fmt.Errorf("time the model: %w", err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("time the model: HTTP %d: %v", resp.StatusCode, err)
			}
			took = append(took, time.Since(begin))
		}
		slices.Sort(took)
		out = append(out, took[1])
	}
	return out, nil
}
