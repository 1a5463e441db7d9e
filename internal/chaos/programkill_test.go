package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/topology"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The program kill: a code-mode agent's one program records entries
// 0 … n-1 in a ledger API, one slow call after another, through an
// openapi_action tool; the worker running the turn is SIGKILLed while
// the API holds the call of entry n/3, and the turn must complete with
// the program's answer over all n entries.
//
// The killed call never answered, so Temporal runs it again on the
// worker left: the API sees that entry twice. What makes the second
// request harmless is the Idempotency-Key the tool sends with every call
// of an operation other than GET (a hash of the tenant, the job and the
// call id <run_program call id>.<n>: the same on every attempt), which
// the ledger honours as a payment API does, and its document declares
// (an Idempotency-Key header parameter): so the call is idempotent by the
// delivery rule, and sent again (a write of an API that declares no key
// is not: TestWritesOnce). So the checks are on the
// API's side, each of which a call made twice, or a retry with another
// key, would break:
//   - every entry was recorded exactly once, under one key of its own;
//   - every entry was requested exactly once, but the killed one, which
//     was requested again (at least once: the kill landed mid-call) and
//     only with its one key;
//
// and on the turn's: one ExecuteTool completion per program call in its
// history, one stored result per call and one for run_program, one
// tool_end per call id on the stream, and the usual promises (the answer
// streamed and stored once, one result row, the exchange once in the
// transcript).
const (
	programCalls      = 40
	programCallsShort = 12
	// programCallDelay is how long the ledger takes to answer a call:
	// long enough that the program is mid-way for seconds.
	programCallDelay = 200 * time.Millisecond
	// programHoldMax bounds how long the ledger holds the call the kill
	// lands in, should the kill never come.
	programHoldMax = 30 * time.Second
)

// programAgent is the chaos catalog's code-mode agent.
const programAgent = "coder"

// programCount is how many calls the program makes: 40 in full, 12 in
// the short run.
func (e *env) programCount() int {
	if e.short {
		return programCallsShort
	}
	return programCalls
}

// programSum is what the program adds up: the ledger's value of entry
// i is i*i+1.
func programSum(n int) int { return (n-1)*n*(2*n-1)/6 + n }

// programSource is the program the model writes: n sequential calls of
// the ledger, each checked, and their values added up. The tool answers
// with a line saying what came back, then the JSON.
func programSource(run string, n int) string {
	return fmt.Sprintf(`let sum = 0;
for (let i = 0; i < %d; i++) {
  const r = await tools.ledger({operation_id: "record", body: {run: %q, i: i}});
  const entry = JSON.parse(r.slice(r.lastIndexOf("\n") + 1));
  if (entry.i !== i) throw new Error("entry " + i + " came back as " + entry.i);
  sum += entry.value;
}
return {calls: %d, sum: sum};`, n, run, n)
}

// programScript is the model of one run: the prompt is answered with the
// program, the program's result with a sentence of its numbers, and its
// error, should it fail, with the error.
func programScript(run string, n int) (*scripted.Script, error) {
	return programScriptOf(programSource(run, n))
}

// programScriptOf is programScript for the program src.
func programScriptOf(src string) (*scripted.Script, error) {
	args, err := json.Marshal(map[string]string{"program": src})
	if err != nil {
		return nil, err
	}
	const prompt = `(?i)^record [0-9]+ entries in the ledger$`
	s := &scripted.Script{
		Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 50},
		Rules: []scripted.Rule{
			{Name: "program-answer", When: scripted.When{User: prompt, Tool: `result: \{"calls":(?P<calls>[0-9]+),"sum":(?P<sum>[0-9]+)\}`},
				Reply: scripted.Reply{Text: "Recorded ${calls} entries, ${sum} in all" + answerTail}},
			{Name: "program-failed", When: scripted.When{User: prompt, Tool: `(?s)^(?P<error>.+)$`},
				Reply: scripted.Reply{Text: "The program failed: ${error}"}},
			{Name: "program", When: scripted.When{User: prompt},
				Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: agent.RunProgramTool, Arguments: string(args)}}}},
		},
	}
	return s, s.Validate()
}

// programKill runs the program kill (see above).
func programKill(ctx context.Context, e *env, job string) error {
	n := e.programCount()
	strikeAt := n / 3
	script, err := programScript(job, n)
	if err != nil {
		return fmt.Errorf("program script: %w", err)
	}
	e.model.Store(scripted.New(script, scripted.Options{}))
	held := e.ledger.reset(job, strikeAt)
	spec := turnSpec{agent: programAgent, prompt: fmt.Sprintf("record %d entries in the ledger", n),
		want: fmt.Sprintf("Recorded %d entries, %d in all", n, programSum(n)) + answerTail}
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}

	sctx, stop := context.WithCancel(ctx)
	struck := make(chan error, 1)
	go func() { struck <- e.killMidProgram(sctx, run.workflowID, held, strikeAt) }()
	ends := map[string]int{}
	err = e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, AgentId: spec.agent, Prompt: spec.prompt},
		func(m moment, ev *pb.ToolEvent) {
			if m == onToolEnd {
				ends[ev.GetCallId()]++
			}
		})
	stop()
	serr := <-struck
	if err != nil {
		return err
	}
	if serr != nil {
		// A turn that ended before the kill says why in its answer.
		return errors.Join(fmt.Errorf("strike: %w", serr), e.check(ctx, trial{}, run, spec, true))
	}
	if err := e.check(ctx, trial{}, run, spec, true); err != nil {
		return err
	}
	retried, err := e.ledger.check(n, strikeAt)
	if err != nil {
		return err
	}
	if err := once("tool_end events on the stream", ends, n+1); err != nil {
		return err
	}
	if err := e.checkProgramTurn(ctx, run, n); err != nil {
		return err
	}
	e.note(fmt.Sprintf("%d calls, each recorded once; the call of entry %d, in flight at the kill, was sent %d times with one Idempotency-Key",
		n, strikeAt, retried))
	return nil
}

// killMidProgram waits until the ledger holds the call of entry at, then
// SIGKILLs the worker running that call and the one that ran the turn's
// latest workflow task (one process or two), lets the ledger answer the
// dead call, and starts them again.
func (e *env) killMidProgram(ctx context.Context, workflowID string, held <-chan func(), at int) error {
	var release func()
	select {
	case release = <-held:
	case <-ctx.Done():
		return fmt.Errorf("the program never called entry %d: %w", at, ctx.Err())
	}
	defer release()
	call, err := e.activityWorker(ctx, workflowID)
	if err != nil {
		return err
	}
	turn, err := e.workflowWorker(ctx, workflowID)
	if err != nil {
		return err
	}
	victims := []*topology.Process{call}
	if turn != nil && turn != call {
		victims = append(victims, turn)
	}
	var names []string
	for _, p := range victims {
		if err := p.Kill(); err != nil {
			return err
		}
		names = append(names, p.Name)
	}
	release()
	e.note(fmt.Sprintf("killed %s mid-call of entry %d (the call on %s, the turn's last workflow task on %s)",
		strings.Join(names, " and "), at, call.Name, nameOf(turn)))
	time.Sleep(500 * time.Millisecond)
	for _, p := range victims {
		if err := p.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

func nameOf(p *topology.Process) string {
	if p == nil {
		return "a worker gone before"
	}
	return p.Name
}

// workflowWorker is the worker process that ran the workflow's latest
// workflow task; nil when that process is no longer running.
func (e *env) workflowWorker(ctx context.Context, workflowID string) (*topology.Process, error) {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return e.lastTaskWorker(ctx, c, workflowID)
}

// lastTaskWorker is the running worker process that started the
// workflow's latest workflow task, by the pid in its identity; nil when
// none does.
func (e *env) lastTaskWorker(ctx context.Context, c client.Client, workflowID string) (*topology.Process, error) {
	identity, err := lastTaskWorker(ctx, c, e.top.Stack.Namespace, workflowID)
	if err != nil {
		return nil, err
	}
	return e.workerOf(identity), nil
}

// checkProgramTurn checks the turn's history and steps: one ExecuteTool
// completion per program call, and one stored result per call and one
// for run_program.
func (e *env) checkProgramTurn(ctx context.Context, run *turnRun, n int) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	_, rec, err := turnRuns(ctx, c, run.workflowID)
	if err != nil {
		return err
	}
	if err := once("ExecuteTool completions in the turn's history", rec.tools, n); err != nil {
		return err
	}
	rows, err := e.db.Query(ctx, `SELECT message->>'tool_call_id' FROM turn_steps
		WHERE tenant_id = $1 AND job_id = $2 AND message->>'role' = 'tool'`, tenant, run.job)
	if err != nil {
		return fmt.Errorf("read steps: %w", err)
	}
	defer rows.Close()
	stored := map[string]int{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		stored[id]++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return once("tool results stored", stored, n+1)
}

// ledger is the API the program's tool calls: POST /ledger records entry
// i of a run and answers its value, i*i+1, after programCallDelay. It
// honours the Idempotency-Key header as payment APIs do: a request with
// a key it has seen records nothing and gets the first one's answer. A
// request without a key is refused. It holds the first request for the
// entry a run strikes at until the trial lets it go.
type ledger struct {
	mu       sync.Mutex
	run      string
	strikeAt int
	held     chan func()      // the hold's release, once it begins
	keys     map[int][]string // the key of each request, by entry
	recorded map[string]int   // the entry each key recorded
	answers  map[string][]byte
	strays   []string // requests the ledger refused
}

func newLedger() *ledger { return &ledger{held: make(chan func(), 1)} }

// reset starts a run: entries are recorded for it alone. The channel
// gets the release of the hold on entry strikeAt once it begins.
func (l *ledger) reset(run string, strikeAt int) <-chan func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run, l.strikeAt = run, strikeAt
	l.held = make(chan func(), 1)
	l.keys, l.recorded, l.answers, l.strays = map[int][]string{}, map[string]int{}, map[string][]byte{}, nil
	return l.held
}

// entryRequest is a request of the suite's APIs that write entries
// (ledger, journal): a run's entry i, with the call's Idempotency-Key.
type entryRequest struct {
	Run string `json:"run"`
	I   *int   `json:"i"`
	key string
}

// decodeEntry reads an entry request; an error says what is missing.
func decodeEntry(w http.ResponseWriter, r *http.Request) (entryRequest, error) {
	var body entryRequest
	body.key = r.Header.Get("Idempotency-Key")
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&body); err != nil || body.I == nil || body.key == "" {
		return body, fmt.Errorf("entry %v of %q with key %q: want {run, i} and an Idempotency-Key", body.I, body.Run, body.key)
	}
	return body, nil
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := decodeEntry(w, r)
	if err != nil {
		l.refuse(w, err.Error())
		return
	}
	key, i := body.key, *body.I
	l.mu.Lock()
	if body.Run != l.run {
		l.mu.Unlock()
		l.refuse(w, fmt.Sprintf("entry %d of run %q, not the current run's", i, body.Run))
		return
	}
	l.keys[i] = append(l.keys[i], key)
	answer, seen := l.answers[key]
	if !seen {
		answer = fmt.Appendf(nil, `{"i":%d,"value":%d}`, i, i*i+1)
		l.answers[key], l.recorded[key] = answer, i
	}
	var hold chan struct{}
	if i == l.strikeAt && len(l.keys[i]) == 1 {
		hold = make(chan struct{})
		l.held <- sync.OnceFunc(func() { close(hold) })
	}
	l.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-time.After(programHoldMax):
		case <-r.Context().Done():
		}
	}
	time.Sleep(programCallDelay)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

func (l *ledger) refuse(w http.ResponseWriter, why string) {
	l.mu.Lock()
	l.strays = append(l.strays, why)
	l.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

// check verifies what the ledger saw of a run of n calls killed at entry
// strikeAt, and returns how many times that entry was requested.
func (l *ledger) check(n, strikeAt int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.strays) > 0 {
		return 0, fmt.Errorf("the ledger refused %d requests: %s", len(l.strays), strings.Join(l.strays, "; "))
	}
	// Each entry recorded once, each under a key of its own.
	byEntry := map[int][]string{}
	for key, i := range l.recorded {
		byEntry[i] = append(byEntry[i], key)
	}
	var errs []error
	for i := range n {
		if got := len(byEntry[i]); got != 1 {
			errs = append(errs, fmt.Errorf("entry %d recorded %d times (keys %q), want once", i, got, byEntry[i]))
		}
	}
	if len(l.recorded) != n {
		errs = append(errs, fmt.Errorf("%d entries recorded, want %d", len(l.recorded), n))
	}
	// Each entry requested once, but the one the kill landed in: again,
	// with its one key.
	for i, keys := range l.keys {
		switch {
		case i == strikeAt && len(keys) < 2:
			errs = append(errs, fmt.Errorf("entry %d, in flight at the kill, requested %d times: the call was not tried again", i, len(keys)))
		case i == strikeAt && slices.ContainsFunc(keys, func(k string) bool { return k != keys[0] }):
			errs = append(errs, fmt.Errorf("entry %d, in flight at the kill, was tried again with another Idempotency-Key: %q", i, keys))
		case i != strikeAt && len(keys) != 1:
			errs = append(errs, fmt.Errorf("entry %d requested %d times, want once: only the call in flight at the kill may be sent again", i, len(keys)))
		}
	}
	return len(l.keys[strikeAt]), errors.Join(errs...)
}
