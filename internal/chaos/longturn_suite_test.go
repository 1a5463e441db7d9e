package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The long turn: one streamed turn of many tool calls (longCalls, or
// longCallsShort in the short run), which continues as new run after run,
// with the worker running it SIGKILLed at one step and the Temporal server
// restarted at another, both steps drawn from the suite's seeded RNG.
//
// "Each call made once" is checked four ways, each of which a call made
// twice would break:
//   - the model: the script has one rule per step (step n answers the
//     result n), and the server counts the requests each rule served.
//     Every step is asked once. A step may be asked again only after a
//     fault struck while its model call ran — the attempt died before it
//     stored the reply, and CallModel asks again only then — so at most
//     one step more per fault, and never before the first fault;
//   - the turn: across the histories of all its runs, the turn recorded
//     one ExecuteTool completion (marker or activity) per call id, and one
//     CallModel completion per step;
//   - the store: turn_steps holds one tool result per call, the results
//     1 … calls once each, and the usage ledger one row per step, except
//     at a step that was asked again;
//   - the client: the follower saw one tool_end per call id, and the
//     turn's one result lists the calls in order, "0+1" … "calls-1+1".
const (
	longCalls      = 1000
	longCallsShort = 60
)

// Agents of the chaos catalog that count: one whose runs hold 1,000
// events (the full run: 1,000 calls, about 2,000 events, are two runs or
// more; the default bound would hold them in one), one whose runs hold
// 100 events (the short run: 60 calls are several runs).
const (
	longAgent      = "counter"
	longAgentShort = "counter-short"
)

// longStepWords is how much the model says at each step, streamed: enough
// that the log's carried tail holds only the latest steps.
const longStepWords = 30

// countRule is the rule that answers the request of step n, the request
// after n results (step 0 answers the prompt).
func countRule(n int) string { return fmt.Sprintf("step-%d", n) }

// countText is what the model says at step n, before it asks for n+1.
func countText(n int) string {
	return fmt.Sprintf("Step %d.", n) + strings.Repeat(" counting", longStepWords)
}

// countAnswer is the turn's answer.
func countAnswer(calls int) string { return fmt.Sprintf("Counted to %d.", calls) }

// countingScript is the model of the long turn: asked to "count", it
// calls the calculator with 0+1; after each result n below calls it says
// countText(n) and asks for n+1; after calls it answers.
func countingScript(calls int) *scripted.Script {
	s := &scripted.Script{Pacing: scripted.Pacing{ChunkWords: 4}}
	next := func(n int) []scripted.ToolCallSpec {
		return []scripted.ToolCallSpec{{Name: "calculator", Arguments: fmt.Sprintf(`{"expression": "%d+1"}`, n)}}
	}
	s.Rules = append(s.Rules, scripted.Rule{Name: countRule(0), When: scripted.When{User: `^count$`}, Reply: scripted.Reply{ToolCalls: next(0)}})
	for n := 1; n < calls; n++ {
		s.Rules = append(s.Rules, scripted.Rule{Name: countRule(n), When: scripted.When{Tool: fmt.Sprintf(`^%d$`, n)},
			Reply: scripted.Reply{Text: countText(n), ToolCalls: next(n)}})
	}
	s.Rules = append(s.Rules, scripted.Rule{Name: countRule(calls), When: scripted.When{Tool: fmt.Sprintf(`^%d$`, calls)},
		Reply: scripted.Reply{Text: countAnswer(calls)}})
	return s
}

// longFault is one fault of the long turn: what it does, the step it is
// drawn to strike at, and, once it has struck, the step the follower had
// seen end then and the model's requests by step until that moment.
type longFault struct {
	name   string
	at     int
	strike func(ctx context.Context) (string, error)

	struck int
	did    string // what it did, for the report
	asked  map[int]int
}

// longTurn runs the long turn and checks it. Its faults strike in order,
// one at a time, each once the follower has seen the tool call of its
// step end (or a later one, when the fault before it still strikes: the
// worker killed is started again before the server restarts), and before
// the last call has ended.
func longTurn(ctx context.Context, e *env, job string) error {
	calls, agentID := longCalls, longAgent
	if e.short {
		calls, agentID = longCallsShort, longAgentShort
	}
	model := scripted.New(countingScript(calls), scripted.Options{MaxRecorded: 1})
	e.model.Store(model)
	wfID := contract.TurnWorkflowID(tenant, job)

	// Two distinct steps in the first two thirds of the turn, so that
	// both strike while it runs, in either order.
	steps := e.rng.Perm(calls * 2 / 3)[:2]
	faults := []*longFault{
		{name: "the worker was SIGKILLed", at: steps[0] + 1, strike: func(ctx context.Context) (string, error) {
			return e.killTurnWorker(ctx, wfID)
		}},
		{name: "the Temporal server restarted", at: steps[1] + 1, strike: func(ctx context.Context) (string, error) {
			return "down 1s", e.top.Stack.Restart(ctx, devstack.ServiceTemporal, time.Second)
		}},
	}
	slices.SortFunc(faults, func(a, b *longFault) int { return a.at - b.at })
	e.log.Info("long turn", zap.String("job", job), zap.Int("calls", calls),
		zap.String("first", faults[0].name), zap.Int("first_at", faults[0].at),
		zap.String("second", faults[1].name), zap.Int("second_at", faults[1].at))

	begin := time.Now()
	run := &turnRun{job: job, workflowID: wfID, tokens: map[int64]string{}}
	f := &follower{model: model, calls: calls, faults: faults, done: make(chan error, 1), ends: map[string]int{}}
	err := e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, AgentId: agentID, Prompt: "count"},
		func(m moment, ev *pb.ToolEvent) {
			if m != onToolEnd {
				return
			}
			struck := f.toolEnded(ctx, ev)
			// The client lets go of its stream and goes on from the other
			// gateway as a fault strikes, and every eighth of the turn, as
			// a reloaded page does: the gateway it comes to reads on from
			// its last event, in whichever run that is.
			run.hop = run.hop || struck || f.steps%max(calls/8, 1) == 0
		})
	took := time.Since(begin)
	if serr := f.wait(); serr != nil {
		return fmt.Errorf("%s: %w", faults[f.next].name, serr)
	}
	if err != nil {
		return err
	}
	if f.next < len(faults) {
		return fmt.Errorf("the turn ended before the fault drawn for step %d (%s) could strike", faults[f.next].at, faults[f.next].name)
	}
	runs, err := e.checkLongTurn(ctx, run, f, calls)
	for _, fl := range faults {
		e.note(fmt.Sprintf("%s at step %d (drawn: %d): %s", fl.name, fl.struck, fl.at, fl.did))
	}
	if runs != nil {
		e.note(fmt.Sprintf("%d calls in %s, %d runs of %v events, %d stream events read resuming %d times; steps asked again: %v",
			calls, took.Round(time.Second), len(runs), eventsOf(runs), run.last, run.resumed, stepsAskedAgain(asked(model, calls))))
	}
	return err
}

// follower is what the long turn's client keeps as it reads: the tool
// calls it saw end, and the faults, struck in order as the steps pass.
type follower struct {
	model  *scripted.Server
	calls  int
	faults []*longFault
	next   int        // the fault to strike next (or striking)
	busy   bool       // faults[next] is striking
	done   chan error // its outcome
	steps  int
	ends   map[string]int // tool_end events by call id
}

// toolEnded counts a tool_end event and strikes the next fault when its
// step has come and the one before has struck; struck says it did.
func (f *follower) toolEnded(ctx context.Context, ev *pb.ToolEvent) (struck bool) {
	f.ends[ev.GetCallId()]++
	f.steps++
	if f.busy {
		select {
		case err := <-f.done:
			if err != nil {
				f.done <- err // for wait
				return false
			}
			f.busy = false
			f.next++
		default:
			return false
		}
	}
	if f.next >= len(f.faults) || f.steps < f.faults[f.next].at || f.steps >= f.calls {
		return false
	}
	fl := f.faults[f.next]
	fl.struck, fl.asked, f.busy = f.steps, asked(f.model, f.calls), true
	go func() {
		did, err := fl.strike(ctx)
		fl.did = did
		f.done <- err
	}()
	return true
}

// wait waits for a fault still striking and returns its error.
func (f *follower) wait() error {
	if !f.busy {
		return nil
	}
	if err := <-f.done; err != nil {
		return err
	}
	f.busy = false
	f.next++
	return nil
}

// asked is the model's requests so far by step, of a turn of calls
// calls.
func asked(model *scripted.Server, calls int) map[int]int {
	out := make(map[int]int, calls+1)
	for n := range calls + 1 {
		if k := model.Served(countRule(n)); k > 0 {
			out[n] = k
		}
	}
	return out
}

// askedAgainAfterFaults checks the requests beyond a step's first: none
// before the first fault struck, and at most one more after each, final
// being the requests by step at the end.
func askedAgainAfterFaults(faults []*longFault, final map[int]int) error {
	prev := 0
	for i, fl := range append(slices.Clone(faults), &longFault{name: "the turn ended", asked: final}) {
		r := repeats(fl.asked)
		if (i == 0 && r > 0) || r > prev+1 {
			return fmt.Errorf("steps %v were asked again by the time %s: more than one for each fault before", stepsAskedAgain(fl.asked), fl.name)
		}
		prev = r
	}
	return nil
}

// repeats is the number of requests beyond the first of each step.
func repeats(asked map[int]int) int {
	n := 0
	for _, k := range asked {
		n += max(k-1, 0)
	}
	return n
}

// checkLongTurn checks what the long turn left behind; it returns the
// turn's runs as far as it read them.
func (e *env) checkLongTurn(ctx context.Context, run *turnRun, f *follower, calls int) ([]runInfo, error) {
	if err := checkLongStream(run, f, calls); err != nil {
		return nil, err
	}
	final, err := checkLongModel(f, calls)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	runs, err := checkLongRuns(ctx, c, run.workflowID, calls)
	if err != nil {
		return runs, err
	}
	if err := e.checkLongResult(ctx, c, run, calls); err != nil {
		return runs, err
	}
	return runs, e.checkLongSteps(ctx, run.job, calls, final)
}

// checkLongStream checks the client's view: the stream ended COMPLETED,
// its indices were contiguous from 1 (stream checks each), its text is
// every step's once, and every call ended once.
func checkLongStream(run *turnRun, f *follower, calls int) error {
	if run.status != pb.Status_STATUS_COMPLETED {
		return fmt.Errorf("turn ended %s (%s), want COMPLETED", run.status, run.errType)
	}
	var want strings.Builder
	for n := 1; n < calls; n++ {
		want.WriteString(countText(n))
	}
	want.WriteString(countAnswer(calls))
	if got := answerText(run); got != want.String() {
		return fmt.Errorf("streamed text of %d bytes, want %d: %s", len(got), want.Len(), firstDifference(got, want.String()))
	}
	if run.content != countAnswer(calls) {
		return fmt.Errorf("content block %q, want %q", run.content, countAnswer(calls))
	}
	return once("tool_end events seen by the follower", f.ends, calls)
}

// checkLongModel checks the model: each step asked once, but a step whose
// call a fault broke before its reply was stored. It returns the requests
// by step.
func checkLongModel(f *follower, calls int) (map[int]int, error) {
	final := asked(f.model, calls)
	for n := range calls + 1 {
		if final[n] == 0 {
			return nil, fmt.Errorf("the model was never asked step %d", n)
		}
	}
	if k := f.model.Served(""); k > 0 {
		return nil, fmt.Errorf("the model was asked %d requests no step answers", k)
	}
	if err := askedAgainAfterFaults(f.faults, final); err != nil {
		return nil, err
	}
	return final, nil
}

// checkLongRuns checks the turn's runs: more than one, each at most 10,000
// events, and each call and each model call recorded once across them. It
// returns the runs as far as it read them.
func checkLongRuns(ctx context.Context, c client.Client, workflowID string, calls int) ([]runInfo, error) {
	runs, rec, err := turnRuns(ctx, c, workflowID)
	if err != nil {
		return nil, err
	}
	if len(runs) < 2 {
		return runs, fmt.Errorf("the turn made %d calls in one run of %d events: it never continued as new", calls, runs[0].events)
	}
	for i, r := range runs {
		if r.events > 10_000 {
			return runs, fmt.Errorf("run %d (%s) holds %d events, more than 10,000", i+1, r.id, r.events)
		}
	}
	if err := once("ExecuteTool completions in the turn's histories", rec.tools, calls); err != nil {
		return runs, err
	}
	if rec.models != calls+1 {
		return runs, fmt.Errorf("%d model calls answered in the turn's histories, want %d", rec.models, calls+1)
	}
	return runs, nil
}

// checkLongResult checks the turn's one result, listing every call in
// order, as the workflow returned it and as agent_results stores it.
func (e *env) checkLongResult(ctx context.Context, c client.Client, run *turnRun, calls int) error {
	res, err := turnclient.Result(ctx, c.GetWorkflow(ctx, run.workflowID, ""))
	if err != nil {
		return fmt.Errorf("the turn's result: %w", err)
	}
	if res.Status != agent.StatusCompleted || res.Output != countAnswer(calls) {
		return fmt.Errorf("result %s %q, want completed %q", res.Status, res.Output, countAnswer(calls))
	}
	if err := inOrder(res.Metadata.ToolCalls, calls); err != nil {
		return err
	}
	var results, listed int
	if err := e.db.QueryRow(ctx, `SELECT count(*), coalesce(max(jsonb_array_length(tool_calls)), 0) FROM agent_results WHERE tenant_id = $1 AND job_id = $2`,
		tenant, run.job).Scan(&results, &listed); err != nil {
		return fmt.Errorf("count results: %w", err)
	}
	if results != 1 || listed != calls {
		return fmt.Errorf("%d agent_results rows listing %d calls, want one listing %d", results, listed, calls)
	}
	return nil
}

// checkLongSteps checks the stored steps: one tool result per call, the
// results 1 … calls once each; one ledger row per model call, but at a
// step asked again; and the session's exchange once.
func (e *env) checkLongSteps(ctx context.Context, job string, calls int, asked map[int]int) error {
	rows, err := e.db.Query(ctx, `SELECT message->>'tool_call_id', message->>'content' FROM turn_steps
		WHERE tenant_id = $1 AND job_id = $2 AND message->>'role' = 'tool'`, tenant, job)
	if err != nil {
		return fmt.Errorf("read steps: %w", err)
	}
	byCall, byResult := map[string]int{}, map[string]int{}
	for rows.Next() {
		var id, content string
		if err := rows.Scan(&id, &content); err != nil {
			rows.Close()
			return err
		}
		byCall[id]++
		byResult[strings.TrimSpace(content)]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := once("tool results stored", byCall, calls); err != nil {
		return err
	}
	for n := 1; n <= calls; n++ {
		if byResult[strconv.Itoa(n)] != 1 {
			return fmt.Errorf("the result %d is stored %d times, want once", n, byResult[strconv.Itoa(n)])
		}
	}

	var ledger, ledgerSteps, extra int
	if err := e.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT step) FROM usage_ledger WHERE tenant_id = $1 AND job_id = $2`,
		tenant, job).Scan(&ledger, &ledgerSteps); err != nil {
		return fmt.Errorf("read the usage ledger: %w", err)
	}
	extra = repeats(asked)
	if ledgerSteps != calls+1 || ledger > calls+1+extra {
		return fmt.Errorf("%d ledger rows over %d steps, want one per model call (%d), and at most %d more for steps asked again",
			ledger, ledgerSteps, calls+1, extra)
	}

	got, err := e.transcript(ctx, job)
	if err != nil {
		return err
	}
	if len(got) != 2 || got[0] != "user: count" || got[1] != "assistant: "+countAnswer(calls) {
		return fmt.Errorf("transcript %q, want the prompt and the answer once each", got)
	}
	return nil
}

// once checks that counts has exactly want keys, each counted once.
func once(what string, counts map[string]int, want int) error {
	for k, n := range counts {
		if n != 1 {
			return fmt.Errorf("%s: call %s %d times, want once", what, k, n)
		}
	}
	if len(counts) != want {
		return fmt.Errorf("%s: %d calls, want %d (recorded: %s)", what, len(counts), want, listed(counts))
	}
	return nil
}

// inOrder checks that the result lists the calls 0+1 … calls-1+1 in
// order, each with its own id, each ok.
func inOrder(recs []agent.ToolCallRecord, calls int) error {
	if len(recs) != calls {
		return fmt.Errorf("the result lists %d calls, want %d", len(recs), calls)
	}
	ids := map[string]bool{}
	for n, r := range recs {
		var args struct {
			Expression string `json:"expression"`
		}
		_ = json.Unmarshal(r.Args, &args)
		if want := fmt.Sprintf("%d+1", n); args.Expression != want || r.Status != agent.ToolOK || ids[r.CallID] {
			return fmt.Errorf("the result's call %d is %s %s (%s), want %q, ok, its own id", n+1, r.CallID, r.Args, r.Status, want)
		}
		ids[r.CallID] = true
	}
	return nil
}

func stepsAskedAgain(asked map[int]int) []int {
	var out []int
	for n, k := range asked {
		if k > 1 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// firstDifference says where got first differs from want.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	clip := func(s string) string {
		s = s[i:]
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("from byte %d, got %s, want %s", i, clip(got), clip(want))
}

// listed names the keys of counts in order, for an error that says which
// calls a history records.
func listed(counts map[string]int) string {
	return strings.Join(slices.Sorted(maps.Keys(counts)), " ")
}
