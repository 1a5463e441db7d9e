// Package chaos is agentflow's fault suite. It runs the production
// topology (internal/topology: the real Temporal server on PostgreSQL, two
// worker processes, two gateway processes), a model it controls at the
// wire (internal/scripted behind a switch, one script per run), and trials
// that break one part while turns stream: a worker or a gateway killed,
// PostgreSQL or the Temporal server restarted, the model failing in each
// way providers do.
//
// It drives the topology from outside, as clients and operators do: it must
// not import the workflows, the activities, the store or the server, whose
// processes it breaks.
//
// After every run it checks what agentflow promises: the turn ends as its
// trial says (completed, or failed with the documented error type); the
// client's stream, resumed on another gateway when its own dies, is gap-free
// and duplicate-free, and its text (less voided attempts) is the model's
// answer exactly once; there is one agent_results row for the job; the
// transcript holds the turn's messages exactly once. The worker and
// gateway kills also run on every other door of the gateway, each read by
// its protocol's own client and checked in its protocol's terms
// (doors.go). One trial
// (longturn.go) runs a turn of 1,000 tool calls across several runs
// through a killed worker and a restarted Temporal server, and checks
// that each call was made once. Another (ingest.go) SIGKILLs a worker
// during a 2,000-document ingest and checks that every document is
// stored once. Another (programkill.go) SIGKILLs the worker running a
// code-mode program of 40 sequential calls and checks that the API saw
// each call once. Another (replay.go) replays 1,000 recorded turns as
// evaluations, once undisturbed and once through a SIGKILLed worker, and
// checks that the two reports are equal and that no tool was called.
// Another (nexus.go) runs a turn through the Nexus service from a
// workflow of another namespace, through a killed worker and a restarted
// Temporal server, and checks that the caller's operation gets the one
// result.
//
// `go tool task chaos` runs every trial in full and prints the table;
// `go tool task test` runs the short version (a run or two of each).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/scripted"
)

// Options configure [Run].
type Options struct {
	// Dir is the state folder of the topology. Required.
	Dir string
	// Short runs each trial once or twice instead of its full count.
	Short bool
	// Only, when set, picks the trials whose ids or names it matches.
	Only *regexp.Regexp
	// Seed seeds the random choices of the trials that make some (the
	// steps the long turn's faults strike at): a run with the seed a
	// failed run printed makes the same choices. Default: from the clock.
	Seed uint64
	// Logger receives progress. Default: none.
	Logger *zap.Logger
	// DevServer runs the topology on the Temporal CLI's dev server, as
	// the dev stack does, instead of the real server.
	DevServer bool
}

// Result is one trial's outcome.
type Result struct {
	Trial    string
	Runs     int
	Passed   int
	Worst    time.Duration // the slowest run, start to final event
	Failures []string      // one line per failed run
	Notes    []string      // what the runs chose and measured, when they say
	// Pauses are, for each run whose strike killed a worker (or cut it
	// off), the longest its client then waited for an event: how long
	// the answer froze.
	Pauses []time.Duration
}

// Run starts the topology, runs the trials and stops it. It returns every
// trial's result; err is set when the topology could not run at all.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Dir == "" {
		return nil, errors.New("chaos: Dir is required")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	log.Info("chaos seed", zap.Uint64("seed", seed))
	e, err := start(ctx, opts.Dir, opts.DevServer, log)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	e.short, e.rng = opts.Short, rand.New(rand.NewPCG(seed, 0))

	var results []Result
	for _, tr := range trials() {
		if opts.Only != nil && !opts.Only.MatchString(tr.id) && !opts.Only.MatchString(tr.name) {
			continue
		}
		runs := tr.runs
		if opts.Short {
			runs = tr.short
		}
		r := Result{Trial: tr.name, Runs: runs}
		for i := range runs {
			job := fmt.Sprintf("%s-%d-%d", tr.id, time.Now().UnixNano(), i)
			took, err := e.runOnce(ctx, tr, job)
			if took > r.Worst {
				r.Worst = took
			}
			for _, n := range e.notes {
				r.Notes = append(r.Notes, fmt.Sprintf("run %d: %s", i+1, n))
			}
			r.Pauses = append(r.Pauses, e.pauses...)
			e.notes, e.pauses = nil, nil
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, e.dump(ctx, job))
				r.Failures = append(r.Failures, fmt.Sprintf("run %d (job %s): %v", i+1, job, err))
				log.Warn("chaos run failed", zap.String("trial", tr.name), zap.String("job", job), zap.Error(err))
			} else {
				r.Passed++
			}
			if err := e.heal(ctx); err != nil {
				return append(results, r), fmt.Errorf("chaos: bring the topology back after %s: %w", tr.name, err)
			}
		}
		log.Info("chaos trial done", zap.String("trial", tr.name), zap.Int("runs", r.Runs), zap.Int("passed", r.Passed))
		results = append(results, r)
	}
	return results, nil
}

// WriteTable prints the results as a table, failures below it.
func WriteTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trial\truns\tpassed\tworst latency\tpause after a kill (p50 / p99 / max)")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Trial, r.Runs, r.Passed, r.Worst.Round(time.Millisecond), pauses(r.Pauses))
	}
	_ = tw.Flush()
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "NOTE %s: %s\n", r.Trial, n)
		}
	}
	for _, r := range results {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "FAIL %s: %s\n", r.Trial, f)
		}
	}
}

// pauses is the p50, p99 and maximum of a trial's pauses, "-" without.
func pauses(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return r(at(0.50)) + " / " + r(at(0.99)) + " / " + r(s[len(s)-1])
}

// Failed reports whether any run of any trial failed.
func Failed(results []Result) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return r.Passed != r.Runs })
}

// catalog is the chaos tenant: an agent with the calculator, a pipeline
// over a local API and an MCP server's slow tool (twice: with a timeout it
// outlives, and one it does not), an agent whose calculator needs
// approval, a code-mode agent whose programs call the local API's
// ledger, and a depot keeper whose tool reads the API's stock. The
// tenant's model has a price, so that turns have a cost. Its verbs are the API's and the MCP server's addresses and the
// MCP URL.
const catalog = `
tenant: chaos
default_agent: calc
egress: ["%[1]s", "%[2]s"]
prices:
  - {model: 'openai:gpt-4o-mini', input: 0.15, output: 0.6}
tools:
  - name: calculator
    kind: calculator
    description: Evaluates an arithmetic expression exactly.
  - name: checked_calculator
    kind: calculator
    description: Evaluates an arithmetic expression, once a person approves.
    approval: always
  - name: execute_pipeline
    kind: execute_pipeline
  - name: gh
    kind: mcp
    approval: never
    config: {url: "%[3]s", tools: [slow], timeout_sec: 30}
  - name: quick
    kind: mcp
    approval: never
    config: {url: "%[3]s", tools: [slow], timeout_sec: 1}
  - name: ledger
    kind: openapi_action
    approval: never
    description: Records entries in the ledger.
    config:
      server: http://%[1]s
      spec:
        openapi: 3.0.3
        info: {title: Ledger, version: "1"}
        paths:
          /ledger:
            post:
              operationId: record
              # The ledger deduplicates by the key, as payment APIs do.
              parameters: [{name: Idempotency-Key, in: header, schema: {type: string}}]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: {type: object, properties: {run: {type: string}, i: {type: integer}}, required: [run, i]}
              responses:
                "200":
                  description: the entry recorded
                  content:
                    application/json:
                      schema: {type: object, properties: {i: {type: integer}, value: {type: integer}}}
  - name: journal
    kind: openapi_action
    approval: never
    description: Appends entries to the journal.
    config:
      server: http://%[1]s
      spec:
        openapi: 3.0.3
        info: {title: Journal, version: "1"}
        paths:
          /journal:
            post:
              operationId: append
              # No Idempotency-Key: the journal deduplicates nothing, and
              # the tool delivers each write at most once.
              requestBody:
                required: true
                content:
                  application/json:
                    schema: {type: object, properties: {run: {type: string}, i: {type: integer}}, required: [run, i]}
              responses:
                "200":
                  description: the entry appended
                  content:
                    application/json:
                      schema: {type: object, properties: {i: {type: integer}, next: {type: integer}, done: {type: boolean}}}
  - name: stock
    kind: openapi_action
    approval: never
    description: Reads how many crates a depot keeps.
    config:
      server: http://%[1]s
      spec:
        openapi: 3.0.3
        info: {title: Stock, version: "1"}
        paths:
          /stock:
            get:
              operationId: count
              parameters: [{name: depot, in: query, required: true, schema: {type: integer}}]
              responses:
                "200":
                  description: the depot's stock
                  content:
                    application/json:
                      schema: {type: object, properties: {depot: {type: integer}, crates: {type: integer}}}
agents:
  - id: calc
    description: Does arithmetic and fetches data, and explains at length.
    model: openai:gpt-4o-mini
    system_prompt: Call the calculator for any arithmetic.
    tools: [calculator, execute_pipeline, gh, quick]
    expose: [mcp, a2a, ag_ui]
  - id: ops
    description: Does arithmetic a person checks.
    model: openai:gpt-4o-mini
    system_prompt: Call checked_calculator for any arithmetic.
    tools: [checked_calculator]
  # The long turn's (longturn.go): a step a call, up to 1,000 calls; the
  # first's runs 1,000 events (a step is about two: a local model call, a
  # local tool call), so 1,000 calls are two runs or more; the second's
  # runs 100 events.
  - id: counter
    description: Counts with the calculator, a call a step.
    model: openai:gpt-4o-mini
    system_prompt: Count with the calculator.
    tools: [calculator]
    limits: {max_iterations: 1001, turn_timeout_sec: 3600, history_events: 1000}
  - id: counter-short
    description: Counts with the calculator, a call a step, in runs of 100 events.
    model: openai:gpt-4o-mini
    system_prompt: Count with the calculator.
    tools: [calculator]
    limits: {max_iterations: 1001, turn_timeout_sec: 3600, history_events: 100}
  # The program kill's (programkill.go): one program, its calls the ledger's.
  - id: coder
    description: Records entries in the ledger with a program.
    model: openai:gpt-4o-mini
    system_prompt: Write one program for the whole task.
    tools: [ledger]
    code_mode: {tools: [ledger]}
    limits: {max_iterations: 3, turn_timeout_sec: 600}
  # The writes kill's (writes.go): writes one after another.
  - id: scribe
    description: Appends entries to the journal.
    model: openai:gpt-4o-mini
    system_prompt: Append the entries one at a time.
    tools: [journal]
    limits: {max_iterations: 12, turn_timeout_sec: 300}
  # The program writes kill's (writes.go): one program, its calls the journal's.
  - id: journal-coder
    description: Appends entries to the journal with a program.
    model: openai:gpt-4o-mini
    system_prompt: Write one program for the whole task.
    tools: [journal]
    code_mode: {tools: [journal]}
    limits: {max_iterations: 3, turn_timeout_sec: 600}
  # The replay's (replay.go): recorded, then replayed from a dataset.
  - id: keeper
    description: Says how many crates a depot keeps.
    model: openai:gpt-4o-mini
    system_prompt: Read the stock tool for any depot.
    tools: [stock]
    limits: {max_iterations: 3, turn_timeout_sec: 300}
`

// answerTail makes the answer long enough (40 words, streamed a word each
// 50 ms: 2 s) that a fault lands while it streams, even on a loaded machine.
var answerTail = strings.Repeat(" and that is the answer", 8)

// script is the model: "compute EXPR" calls the calculator, the tool's
// result is answered at length. fault, when set, applies to the rule named
// by fault.rule.
func script(f *modelFault) *scripted.Script {
	const expr = `(?P<expr>[0-9*+ ]+)`
	number := `(?s)(?:"result"\s*:\s*"?|^\s*)(?P<result>-?[0-9][0-9.]*)`
	s := &scripted.Script{
		Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 50},
		Rules: []scripted.Rule{
			{Name: "call-checked", When: scripted.When{System: "checked_calculator", User: `(?i)^compute ` + expr + `$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "checked_calculator", Arguments: `{"expression": "${expr}"}`}}}},
			{Name: "call", When: scripted.When{User: `(?i)^compute ` + expr + `$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "calculator", Arguments: `{"expression": "${expr}"}`}}}},
			{Name: "answer", When: scripted.When{User: `(?i)^compute ` + expr + `$`, Tool: number},
				Reply: scripted.Reply{Text: "${expr} = ${result}" + answerTail}},
			// Arguments that are not JSON, then corrected once the
			// model reads why they were refused.
			{Name: "broken-call", When: scripted.When{User: `(?i)^broken compute ` + expr + `$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "calculator", Arguments: `{"expression": "${expr}"`}}}},
			{Name: "broken-answer", When: scripted.When{User: `(?i)^broken compute ` + expr + `$`, Tool: number},
				Reply: scripted.Reply{Text: "${expr} = ${result}" + answerTail}},
			{Name: "broken-retry", When: scripted.When{User: `(?i)^broken compute ` + expr + `$`, Tool: `.`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "calculator", Arguments: `{"expression": "${expr}"}`}}}},
			{Name: "fetch", When: scripted.When{User: `(?i)^fetch items from (?P<url>\S+)$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "execute_pipeline",
					Arguments: `{"session_id": "chaos", "pipeline": [{"step": "http_request", "url": "${url}", "method": "GET"}]}`}}}},
			{Name: "fetched", When: scripted.When{User: `(?i)^fetch items from`, Tool: `a table of (?P<rows>[0-9]+) rows?`},
				Reply: scripted.Reply{Text: "Fetched ${rows} rows" + answerTail}},
			{Name: "too-big", When: scripted.When{User: `(?i)^fetch items from`, Tool: `larger than (?P<limit>[0-9]+) bytes`},
				Reply: scripted.Reply{Text: "Too much data: over ${limit} bytes" + answerTail}},
			{Name: "hurry", When: scripted.When{User: `(?i)^hurry for (?P<ms>[0-9]+) ms$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "quick_slow", Arguments: `{"ms": ${ms}}`}}}},
			{Name: "gave-up", When: scripted.When{User: `(?i)^hurry for`, Tool: `no answer within (?P<limit>[0-9a-z.]+)`},
				Reply: scripted.Reply{Text: "Gave up: no answer within ${limit}" + answerTail}},
			{Name: "work", When: scripted.When{User: `(?i)^work for (?P<ms>[0-9]+) ms$`},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "gh_slow", Arguments: `{"ms": ${ms}}`}}}},
			{Name: "worked", When: scripted.When{User: `(?i)^work for`, Tool: `worked for (?P<ms>[0-9]+) ms`},
				Reply: scripted.Reply{Text: "Done: worked for ${ms} ms" + answerTail}},
		},
	}
	if f != nil {
		for i := range s.Rules {
			if s.Rules[i].Name != f.rule {
				continue
			}
			if f.delayMS > 0 {
				s.Rules[i].Reply.DelayMS = f.delayMS
				continue
			}
			fault := f.fault
			s.Rules[i].Fault = &fault
		}
	}
	return s
}

// modelFault is how the model misbehaves in a trial: a fault of one rule,
// or a delay before it answers.
type modelFault struct {
	rule    string
	fault   scripted.Fault
	delayMS int
}

// serveItems is the API: /items has three items, /big 11 MiB of them,
// more than a tenant's egress lets a tool read.
func serveItems(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/big" {
		item := `{"id": 1, "name": "bolt"},`
		_, _ = io.WriteString(w, "[")
		for range (11 << 20) / len(item) {
			_, _ = io.WriteString(w, item)
		}
		_, _ = io.WriteString(w, `{"id": 2, "name": "nut"}]`)
		return
	}
	_, _ = io.WriteString(w, `[{"id": 1, "name": "bolt"}, {"id": 2, "name": "nut"}, {"id": 3, "name": "washer"}]`)
}
