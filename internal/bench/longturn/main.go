// Command longturn measures one long turn: an agent that calls the
// calculator CALLS times, one call a step, before it answers. It serves
// the scripted model itself (a script that counts with the calculator, with
// the prompt cache of internal/scripted on), starts the stack of `go tool
// task up` pointed at it (or the production topology with -topology
// production), defines the agent through the gateway, and starts the turn
// with the gateway's gRPC Stream. A follower reads the whole stream,
// resuming it from the last index it saw when it breaks, and counts the
// events it got twice and those it never got. Then it reads every run of
// the turn's workflow (the continue-as-new chain, newest first) with
// DescribeWorkflowExecution, for their events and history bytes.
//
// It drives the stack from outside — the gateway's API, and the Temporal
// client for the histories — and must not import the workflows, the
// activities or the store.
//
//	go build -o .bin/starter ./starter && go run ./internal/bench/longturn -calls 1000
//
// `go tool task longturn` runs it (CALLS, TOPOLOGY=production). Progress
// goes to stderr; the last line of stdout is one JSON object (report). It
// exits non-zero when the turn did not complete, after printing what it
// measured. With -up=false it uses a stack that is already running, whose
// model must be this program's (-model-addr, and OPENAI_BASE_URL of the
// stack pointing at it); -worker-pids then names the processes to measure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "longturn:", err)
		os.Exit(1)
	}
}

type options struct {
	calls      int
	topology   string // dev or production
	up         bool
	starter    string
	temporalDB string
	dir        string
	modelAddr  string
	gateway    string
	httpAPI    string
	temporal   string
	namespace  string
	token      string
	workerPIDs string
	timeout    time.Duration
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.calls, "calls", 1000, "tool calls the turn makes, one a step, before it answers")
	flag.StringVar(&o.topology, "topology", "dev", "dev: the stack of `task up` (worker and gateway in one process, the Temporal dev server); production: `up --production` (the Temporal server on Postgres, two workers, a gateway)")
	flag.BoolVar(&o.up, "up", true, "start the stack (.bin/starter up); false: use a running one")
	flag.StringVar(&o.starter, "starter", ".bin/starter", "the starter program that runs the stack")
	flag.StringVar(&o.temporalDB, "temporal-db", "file", "with -topology dev: the dev server's storage, file or memory")
	flag.StringVar(&o.dir, "dir", ".data/longturn", "where the stack's log goes")
	flag.StringVar(&o.modelAddr, "model-addr", "127.0.0.1:0", "where the scripted model listens")
	flag.StringVar(&o.gateway, "gateway", "127.0.0.1:50051", "with -up=false: the gateway's gRPC address")
	flag.StringVar(&o.httpAPI, "http-api", "http://127.0.0.1:8080", "with -up=false: the gateway's HTTP API, where the turn's timeline is read (\"\": not read)")
	flag.StringVar(&o.temporal, "temporal", "127.0.0.1:7233", "with -up=false: the Temporal frontend")
	flag.StringVar(&o.namespace, "namespace", "default", "the Temporal namespace")
	flag.StringVar(&o.token, "token", "dev-token", "the gateway's bearer token, of tenant demo")
	flag.StringVar(&o.workerPIDs, "worker-pids", "", "with -up=false: the worker processes to measure, comma-separated (none: CPU and RSS are not measured)")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "how long the turn may take; then it is canceled")
	flag.Parse()
	if o.calls < 1 {
		return o, errors.New("-calls must be at least 1")
	}
	if o.topology != "dev" && o.topology != "production" {
		return o, fmt.Errorf("-topology %q: want dev or production", o.topology)
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench(ctx, o)
	if err != nil && r.Failure == "" {
		r.Failure = err.Error()
	}
	line, merr := json.Marshal(r)
	if merr != nil {
		return merr
	}
	fmt.Println(string(line))
	if err != nil {
		return err
	}
	if !r.Completed {
		return fmt.Errorf("the turn did not complete: %s", r.Failure)
	}
	return nil
}

// bench serves the model, starts (or finds) the stack and measures the
// turn on it. Its error is what kept it from measuring; the report says
// what was measured.
func bench(ctx context.Context, o options) (report, error) {
	r := report{Topology: o.topology, Calls: o.calls}
	model, err := startModel(o.modelAddr, o.calls)
	if err != nil {
		return r, err
	}
	defer model.close()
	var st *stack
	if o.up {
		if st, err = startStack(ctx, o, model.url()); err != nil {
			return r, err
		}
		defer st.stop()
	} else if st, err = runningStack(o); err != nil {
		return r, err
	}
	return measure(ctx, o, st, model)
}

// progress writes a line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "longturn: "+format+"\n", args...)
}
