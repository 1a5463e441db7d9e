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

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/server"
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

// modes are the flags that pick what the command does, beside the
// measurement's options.
type modes struct {
	report, against   string // -report, -against
	modelURL, modelMS string // -model-url, -model-ms
	only              string
	pairs             int
	gateway, token    string // with -pairs
}

func run() error {
	o, m := parseFlags()
	if m.report != "" {
		return printReport(os.Stdout, m.report, m.against)
	}
	if err := o.setModelTimes(m.modelMS, m.modelURL); err != nil {
		return err
	}
	if err := check(o, m); err != nil {
		return err
	}
	o.timed = &requestTimes{}
	c, w, err := startWorker(o)
	if err != nil {
		return err
	}
	defer c.Close()
	defer w.Stop()

	// A stack just started is still busy with its own start (the dev
	// server's system workflows, cold caches): measured at once, the floor
	// came out a quarter slower than a minute later, which flattered
	// whatever was measured after it.
	if err := warm(context.Background(), c, o); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	if m.pairs > 0 {
		return measurePairs(context.Background(), os.Stdout, c, o, m.pairs, m.gateway, m.token)
	}
	return measureAll(c, o, m.only)
}

// parseFlags reads the command line.
func parseFlags() (options, modes) {
	var o options
	var m modes
	flag.StringVar(&m.report, "report", "", "print the floor (JSON lines in this file) beside the line in -against, instead of measuring")
	flag.StringVar(&m.against, "against", "", "with -report: agentflow's line of ../shared/peers/run's output")
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
	flag.StringVar(&m.modelURL, "model-url", "", "instead of -model-ms: time the turn's two calls against this OpenAI-compatible base URL (the peers' fake model, $FAKEOAI) and wait as long as each took")
	flag.StringVar(&m.modelMS, "model-ms", "", "the model-like activities' durations in ms, comma-separated, one per call (e.g. 330,630 for the peers' model at TTFT_MS=300 TOKEN_MS=20); empty: no wait")
	flag.DurationVar(&o.warmup, "warmup", 15*time.Second, "run turn-shaped workflows by -conc callers this long before measuring, so that a stack just started is measured settled")
	flag.StringVar(&m.only, "only", "", "measure only this workflow: empty, turn or calls (default all three)")
	flag.IntVar(&m.pairs, "pairs", 0, "instead: measure the turn-shaped floor and an agentflow turn through -gateway, alternately, this many times each, and print each pair's ratios and their medians")
	flag.BoolVar(&o.requests, "requests", false, "print to stderr, for the workflows run one after another, the server requests each made and how long the server took to answer each kind (agentflow's worker reports the same of its turns as temporal_request_latency; `go tool task profile` prints it)")
	flag.StringVar(&m.gateway, "gateway", "127.0.0.1:50051", "with -pairs: agentflow's gRPC API")
	flag.StringVar(&m.token, "token", "dev-token", "with -pairs: its bearer token")
	flag.Parse()
	return o, m
}

// setModelTimes sets how long the model-like activities take: as -model-ms
// says, or as the model at -model-url takes (which it times now).
func (o *options) setModelTimes(modelMS, modelURL string) error {
	for f := range strings.SplitSeq(modelMS, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ms, err := strconv.Atoi(f)
		if err != nil || ms < 0 {
			return fmt.Errorf("-model-ms %q: want milliseconds, comma-separated", modelMS)
		}
		o.modelTimes = append(o.modelTimes, time.Duration(ms)*time.Millisecond)
	}
	if modelURL != "" {
		if len(o.modelTimes) > 0 {
			return errors.New("-model-url and -model-ms: give one")
		}
		times, err := timeModel(modelURL)
		if err != nil {
			return err
		}
		o.modelTimes = times
	}
	return nil
}

// check rejects flags that contradict each other or are out of range.
func check(o options, m modes) error {
	if m.pairs < 0 {
		return errors.New("-pairs must not be negative")
	}
	if m.only != "" && m.only != "empty" && m.only != "turn" && m.only != "calls" {
		return fmt.Errorf("-only %q: want empty, turn or calls", m.only)
	}
	if o.localModel && o.signals > 0 {
		return errors.New("-local-model sends no signals: a local call holds its workflow task, so signals would wait for its end")
	}
	if o.seq < 1 || o.conc < 1 || o.total < 1 || o.signals < 0 || o.pollers < 2 || o.warmup < 0 {
		return errors.New("seq, conc, total and pollers (≥ 2) must be positive, signals and warmup not negative")
	}
	return nil
}

// startWorker dials Temporal and starts the floor's own worker, with its
// workflows and activities, in this process. The caller closes both.
func startWorker(o options) (client.Client, worker.Worker, error) {
	// Compressed as agentflow's server compresses its requests to the same
	// address: the floor is measured with the same client.
	compression, err := server.Compression(o.address, os.Getenv("AGENTFLOW_TEMPORAL_COMPRESSION"))
	if err != nil {
		return nil, nil, err
	}
	c, err := client.Dial(client.Options{HostPort: o.address, Namespace: o.namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: compression,
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(o.timed.intercept)}}})
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", o.address, err)
	}
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
		c.Close()
		return nil, nil, fmt.Errorf("start worker: %w", err)
	}
	return c, w, nil
}

// measureAll measures each workflow (or the one only names) and prints
// its line.
func measureAll(c client.Client, o options, only string) error {
	for _, b := range []struct {
		mode     string
		workflow string
		args     []any
	}{
		{"empty workflow", "FloorEmpty", nil},
		{"turn shape", "FloorTurnShape", o.shapeArgs()},
		{"model calls", "FloorModelCalls", nil},
	} {
		if only != "" && !strings.Contains(b.mode, only) {
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

// pct is the peers' percentile: the element at floor((n-1)·p).
func pct(sorted []float64, p float64) float64 { return sorted[int(float64(len(sorted)-1)*p)] }

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

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
