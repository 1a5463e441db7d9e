package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The writes kill: a turn makes 3 to 8 writes, one after another, to a
// journal API that counts every request and deduplicates nothing (its
// operation declares no Idempotency-Key, so the tool delivers at most
// once), and the worker running the turn is SIGKILLed at a random moment
// of it. Each write is held by the API for journalDelay, so that many
// kills land with a request in flight. The checks are the API's and the
// stream's:
//   - no write reached the API twice (the tool sends each call's key; the
//     API counts the requests of each key);
//   - every write the stream says ended ok reached the API once, and
//     none it says failed reached it at all (never "failed" when it was
//     made); one it says is unknown reached it at most once;
//   - the turn completed, its answer is the one its writes' outcomes
//     call for, streamed and stored once (check).
const (
	writesRuns      = 100
	writesRunsShort = 1
	journalDelay    = 400 * time.Millisecond
)

// writesAgent is the chaos catalog's agent of the writes kill.
const writesAgent = "scribe"

// journal is the API's POST /journal: a run's writes, by key.
type journal struct {
	mu    sync.Mutex
	run   string
	n     int            // the writes the run makes
	byKey map[string]int // requests of each key
	ofKey map[string]int // the entry each key wrote
	// holdAt is the entry whose first request the journal holds until
	// its release, which held gets (-1: none).
	holdAt int
	held   chan func()
}

func newJournal() *journal {
	return &journal{byKey: map[string]int{}, ofKey: map[string]int{}, holdAt: -1, held: make(chan func(), 1)}
}

// reset starts a run of n writes, holding none.
func (j *journal) reset(run string, n int) { j.resetHolding(run, n, -1) }

// resetHolding starts a run of n writes whose entry at is held: the
// channel gets the release of the hold once the entry's request came.
func (j *journal) resetHolding(run string, n, at int) <-chan func() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.run, j.n, j.byKey, j.ofKey = run, n, map[string]int{}, map[string]int{}
	j.holdAt, j.held = at, make(chan func(), 1)
	return j.held
}

func (j *journal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := decodeEntry(w, r)
	if err != nil {
		http.Error(w, `{"error":"want {run, i} and an Idempotency-Key"}`, http.StatusBadRequest)
		return
	}
	key := body.key
	j.mu.Lock()
	if body.Run != j.run {
		j.mu.Unlock()
		http.Error(w, `{"error":"not the current run"}`, http.StatusConflict)
		return
	}
	// The write takes effect as it arrives; its answer comes later, and
	// may be lost with the worker that waits for it.
	j.byKey[key]++
	j.ofKey[key] = *body.I
	done := *body.I+1 >= j.n
	var hold chan struct{}
	if *body.I == j.holdAt && j.byKey[key] == 1 {
		// The call the kill lands in: held until the kill is made.
		hold = make(chan struct{})
		j.held <- sync.OnceFunc(func() { close(hold) })
	}
	j.mu.Unlock()
	wait := time.After(journalDelay)
	if hold != nil {
		wait = time.After(programHoldMax)
	}
	select {
	case <-hold:
	case <-wait:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"i":%d,"next":%d,"done":%t}`, *body.I, *body.I+1, done)
}

// delivered returns the requests of each key of the run.
func (j *journal) delivered() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return maps.Clone(j.byKey)
}

// writesScript is the model of a run of the writes kill: write 0, then
// the write the API's answer names next, until it says done; an unknown
// outcome or a failure ends the turn with an answer that says so.
func writesScript() (*scripted.Script, error) {
	const prompt = `(?i)^write (?P<n>[0-9]+) entries for (?P<run>\S+)$`
	call := func(i string) []scripted.ToolCallSpec {
		return []scripted.ToolCallSpec{{Name: "journal", Arguments: `{"operation_id": "append", "body": {"run": "${run}", "i": ` + i + `}}`}}
	}
	s := &scripted.Script{
		Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 20},
		Rules: []scripted.Rule{
			{Name: "writes-unknown", When: scripted.When{User: prompt, Tool: `unknown outcome`}, Reply: scripted.Reply{Text: writesUnknown}},
			{Name: "writes-failed", When: scripted.When{User: prompt, Tool: `(?s)^error`}, Reply: scripted.Reply{Text: writesFailed}},
			{Name: "writes-done", When: scripted.When{User: prompt, Tool: `"done":\s*true`}, Reply: scripted.Reply{Text: "Wrote ${n} entries" + answerTail}},
			{Name: "writes-next", When: scripted.When{User: prompt, Tool: `"next":\s*(?P<next>[0-9]+)`}, Reply: scripted.Reply{ToolCalls: call("${next}")}},
			{Name: "writes-first", When: scripted.When{User: prompt}, Reply: scripted.Reply{ToolCalls: call("0")}},
		},
	}
	return s, s.Validate()
}

// The answers of a run whose writes did not all end ok.
var (
	writesUnknown = "A write may or may not have been made" + answerTail
	writesFailed  = "A write failed" + answerTail
)

// writesKill runs the writes kill (see above).
func writesKill(ctx context.Context, e *env, job string) error {
	return writesUnder(ctx, e, job, killStreamingWorker)
}

// writesPartition runs the writes kill with a partition for the kill: the
// worker running the turn is cut off from Temporal, its call in flight
// going on, and let back partitionFor later.
func writesPartition(ctx context.Context, e *env, job string) error {
	return writesUnder(ctx, e, job, partitionWorker)
}

// partitionFor is how long a partitioned worker is cut off: longer than
// a call's heartbeat timeout and a workflow task's timeout, so that
// Temporal gives its work to the other worker while it still runs.
const partitionFor = 12 * time.Second

// partitionWorker cuts the worker running the turn's call (or workflow
// task) off from Temporal, and restores its link partitionFor later.
func partitionWorker(ctx context.Context, e *env, at strikePoint) error {
	p, err := e.activityWorker(ctx, at.workflowID)
	if err != nil {
		return err
	}
	i := slices.Index(e.top.Workers, p)
	if i < 0 || i >= len(e.proxies) {
		return fmt.Errorf("worker %s has no proxy to cut", p.Name)
	}
	e.proxies[i].Cut()
	if at.run != nil {
		at.run.killedAt.Store(time.Now().UnixNano())
	}
	defer e.proxies[i].Restore()
	select {
	case <-time.After(partitionFor):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writesUnder runs a turn of writes and strikes it at a random moment.
func writesUnder(ctx context.Context, e *env, job string, strike func(context.Context, *env, strikePoint) error) error {
	n := 3 + e.rng.IntN(6)
	script, err := writesScript()
	if err != nil {
		return fmt.Errorf("writes script: %w", err)
	}
	e.model.Store(scripted.New(script, scripted.Options{}))
	e.journal.reset(job, n)
	spec := turnSpec{agent: writesAgent, prompt: fmt.Sprintf("write %d entries for %s", n, job)}
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}
	// A moment within the writes: each takes the API's delay and a model
	// call of a few tens of milliseconds.
	after := time.Duration(e.rng.Int64N(int64(n) * int64(journalDelay+100*time.Millisecond)))
	struck := make(chan error, 1)
	go func() {
		select {
		case <-time.After(after):
		case <-ctx.Done():
			struck <- ctx.Err()
			return
		}
		struck <- strike(ctx, e, strikePoint{workflowID: run.workflowID, run: run})
	}()
	ended := map[string]string{} // call id → status
	err = e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, AgentId: spec.agent, Prompt: spec.prompt},
		func(m moment, ev *pb.ToolEvent) {
			if m == onToolEnd {
				ended[ev.GetCallId()] = ev.GetStatus()
			}
		})
	if serr := <-struck; serr != nil {
		return fmt.Errorf("strike after %s: %w", after, serr)
	}
	e.paused(run)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, status := range ended {
		counts[status]++
	}
	switch {
	case counts["unknown"] > 0:
		spec.want = writesUnknown
	case counts["error"] > 0:
		spec.want = writesFailed
	default:
		spec.want = fmt.Sprintf("Wrote %d entries", n) + answerTail
	}
	if err := e.check(ctx, trial{}, run, spec, true); err != nil {
		return err
	}
	if err := checkWrites(job, ended, e.journal.delivered()); err != nil {
		return err
	}
	e.note(fmt.Sprintf("%d writes, struck after %s: %d ok, %d unknown, %d failed, none delivered twice",
		n, after.Round(time.Millisecond), counts["ok"], counts["unknown"], counts["error"]))
	return nil
}

// checkWrites checks what the API saw against what the stream said of
// each call (writesKill).
func checkWrites(job string, ended map[string]string, delivered map[string]int) error {
	var flaws []string
	for key, n := range delivered {
		if n > 1 {
			flaws = append(flaws, fmt.Sprintf("key %s delivered %d times", key, n))
		}
	}
	for call, status := range ended {
		n := delivered[callKey(tenant, job, call)]
		switch {
		case status == "ok" && n != 1:
			flaws = append(flaws, fmt.Sprintf("call %s ended ok and reached the API %d times", call, n))
		case status == "error" && n != 0:
			flaws = append(flaws, fmt.Sprintf("call %s ended failed, and the API had it", call))
		case status == "unknown" && n > 1:
			flaws = append(flaws, fmt.Sprintf("call %s ended unknown and reached the API %d times", call, n))
		}
	}
	if len(delivered) > len(ended) {
		flaws = append(flaws, fmt.Sprintf("the API had %d writes, the stream ended %d calls", len(delivered), len(ended)))
	}
	if len(flaws) > 0 {
		return fmt.Errorf("writes: %s", strings.Join(flaws, "; "))
	}
	return nil
}

// callKey is the Idempotency-Key a call's writes carry (tools.CallKey,
// computed here: the suite does not import the runtime it breaks).
func callKey(tenantID, jobID, callID string) string {
	sum := sha256.Sum256([]byte(tenantID + "\x00" + jobID + "\x00" + callID))
	return hex.EncodeToString(sum[:16])
}

// The program writes kill: a code-mode program appends entries 0 … n-1
// to the journal, one call after another, and the worker running the
// call of entry n/3 is SIGKILLed while the journal holds it. The journal
// deduplicates nothing and its operation declares no key, so the call is
// delivered at most once: the retried call does not send it again, its
// outcome is unknown, the program's promise rejects with that, and the
// program stops there. Checks: every entry before the kill's reached the
// journal once, the killed one once, none after it; the turn completed
// with the model's account of the failed program, streamed and stored
// once (check).
func programWritesKill(ctx context.Context, e *env, job string) error {
	n := e.programCount()
	strikeAt := n / 3
	src := fmt.Sprintf(`for (let i = 0; i < %d; i++) {
  await tools.journal({operation_id: "append", body: {run: %q, i: i}});
}
return {calls: %d};`, n, job, n)
	script, err := programScriptOf(src)
	if err != nil {
		return fmt.Errorf("program script: %w", err)
	}
	e.model.Store(scripted.New(script, scripted.Options{}))
	held := e.journal.resetHolding(job, n, strikeAt)
	spec := turnSpec{agent: journalCoder, prompt: fmt.Sprintf("record %d entries in the ledger", n)}
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}
	sctx, stop := context.WithCancel(ctx)
	struck := make(chan error, 1)
	go func() { struck <- e.killMidProgram(sctx, run.workflowID, held, strikeAt) }()
	err = e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, AgentId: spec.agent, Prompt: spec.prompt}, func(moment, *pb.ToolEvent) {})
	stop()
	if serr := <-struck; serr != nil {
		return fmt.Errorf("strike: %w", serr)
	}
	if err != nil {
		return err
	}
	spec.want = answerText(run)
	if !strings.HasPrefix(spec.want, "The program failed: ") || !strings.Contains(spec.want, "unknown") {
		return fmt.Errorf("answer %q: want the program failed on the call whose outcome is unknown", spec.want)
	}
	if err := e.check(ctx, trial{}, run, spec, true); err != nil {
		return err
	}
	byEntry := map[int]int{}
	for key, count := range e.journal.delivered() {
		if count != 1 {
			return fmt.Errorf("journal: key %s delivered %d times", key, count)
		}
		byEntry[e.journal.entryOf(key)]++
	}
	for i := range n {
		want := 0
		if i <= strikeAt {
			want = 1
		}
		if byEntry[i] != want {
			return fmt.Errorf("journal: entry %d delivered %d times, want %d", i, byEntry[i], want)
		}
	}
	e.note(fmt.Sprintf("entries 0…%d delivered once each; the call of entry %d, in flight at the kill, was not sent again and the program stopped on its unknown outcome",
		strikeAt, strikeAt))
	return nil
}

// journalCoder is the chaos catalog's code-mode agent of the journal.
const journalCoder = "journal-coder"

// entryOf is the entry a key wrote.
func (j *journal) entryOf(key string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ofKey[key]
}
