package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The replay kill: the keeper agent answers n questions, each with one
// call of the API's stock tool, over the gRPC API; its recorded turns
// become datasets (RecordDataset, by the credential's tenant), which are
// replayed twice: once undisturbed, then with the worker that ran the
// evaluation's latest workflow task SIGKILLed once a third of the cases
// are scored, and started again. The checks:
//   - both replays complete, and every case of the undisturbed one agrees
//     with its recording: it passes, its answer agrees, its one call
//     matches and none diverges;
//   - the killed replay's report (totals and, per case, the outcome, the
//     checks, the answer, tokens, cost and the replay's agreement)
//     equals the undisturbed one's; only latencies and job ids differ;
//   - the stock API saw no request during either replay;
//   - each case was scored once: one eval_cases row per case and
//     version.
//
// An evaluation runs at most agent.MaxEvalCases cases, so the 1,000
// recorded turns are two datasets of 500, recorded by time and replayed
// side by side: one replay of 1,000 turns.
const (
	replayTurns      = 1000
	replayTurnsShort = 60
	// replayRecorders is how many turns are recorded at once.
	replayRecorders = 16
	// replayConcurrency is each evaluation's concurrency.
	replayConcurrency = 8
)

// replayAgent is the chaos catalog's keeper.
const replayAgent = "keeper"

// replayCount is how many turns are recorded and replayed: 1,000 in
// full, 60 in the short run.
func (e *env) replayCount() int {
	if e.short {
		return replayTurnsShort
	}
	return replayTurns
}

// replayUsage is what each model call reports: fixed, so that a replay's
// tokens and cost are the recording's.
var replayUsage = &scripted.Usage{PromptTokens: 180, CompletionTokens: 24}

// replayScript is the keeper's model: a question calls the stock tool,
// its result is answered in a sentence.
func replayScript() (*scripted.Script, error) {
	const question = `(?i)^how many crates does depot (?P<depot>[0-9]+) keep\?$`
	s := &scripted.Script{Rules: []scripted.Rule{
		{Name: "stock-call", When: scripted.When{User: question},
			Reply: scripted.Reply{Usage: replayUsage,
				ToolCalls: []scripted.ToolCallSpec{{Name: "stock", Arguments: `{"operation_id": "count", "params": {"depot": ${depot}}}`}}}},
		{Name: "stock-answer", When: scripted.When{User: question, Tool: `"crates":\s*(?P<crates>[0-9]+)`},
			Reply: scripted.Reply{Usage: replayUsage, Text: "Depot ${depot} keeps ${crates} crates."}},
		{Name: "stock-failed", When: scripted.When{User: question, Tool: `(?s)^(?P<error>.+)$`},
			Reply: scripted.Reply{Usage: replayUsage, Text: "No stock: ${error}"}},
	}}
	return s, s.Validate()
}

// serveStock is the API's GET /stock: depot d keeps 7d+3 crates.
func (e *env) serveStock(w http.ResponseWriter, r *http.Request) {
	e.stockCalls.Add(1)
	d, err := strconv.Atoi(r.URL.Query().Get("depot"))
	if err != nil {
		http.Error(w, `{"error": "depot is a number"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"depot":%d,"crates":%d}`, d, 7*d+3)
}

// replayKill runs the replay kill (see above).
func replayKill(ctx context.Context, e *env, job string) error {
	n := e.replayCount()
	script, err := replayScript()
	if err != nil {
		return fmt.Errorf("replay script: %w", err)
	}
	e.model.Store(scripted.New(script, scripted.Options{}))
	datasets, err := e.recordTurns(ctx, job, n)
	if err != nil {
		return err
	}

	// The undisturbed replay, measured.
	e.model.Store(scripted.New(script, scripted.Options{}))
	e.stockCalls.Store(0)
	begin := time.Now()
	calm, err := e.replay(ctx, job+"-calm", datasets, 0, nil)
	if err != nil {
		return err
	}
	took := time.Since(begin)
	model := e.model.Load()
	calls := model.Served("stock-call") + model.Served("stock-answer") + model.Served("stock-failed")
	if err := replayAgrees(calm, n); err != nil {
		return fmt.Errorf("undisturbed replay: %w", err)
	}

	// The same datasets, a worker killed a third of the way.
	begin = time.Now()
	killed, err := e.replay(ctx, job+"-kill", datasets, n/3, func(ctx context.Context, evalID string, scored int) error {
		return e.killEvalWorker(ctx, contract.EvalWorkflowID(tenant, evalID), scored, n)
	})
	if err != nil {
		return err
	}
	tookKilled := time.Since(begin)
	if got := e.stockCalls.Load(); got != 0 {
		return fmt.Errorf("the stock API saw %d requests during the replays, want 0", got)
	}
	if err := sameReport(calm, killed); err != nil {
		return fmt.Errorf("the killed replay's report differs from the undisturbed one's: %w", err)
	}
	for _, runs := range [][]*pb.EvalRun{calm, killed} {
		if err := e.scoredOnce(ctx, runs); err != nil {
			return err
		}
	}
	var tokens int64
	var cost float64
	for _, r := range calm {
		for _, t := range r.GetTotals() {
			tokens += t.GetTokens()
			cost += t.GetCostUsd()
		}
	}
	e.note(fmt.Sprintf("replayed %d recorded turns (datasets: %d, concurrency %d each) in %s: %.1f cases/s, %d model calls, %d tokens, $%.4f; "+
		"the killed replay's report equals it (%s); the stock API saw 0 requests", n, len(datasets), replayConcurrency,
		took.Round(100*time.Millisecond), float64(n)/took.Seconds(), calls, tokens, cost, tookKilled.Round(100*time.Millisecond)))
	return nil
}

// recordTurns has the keeper answer n questions over the gRPC API, both
// gateways, replayRecorders at once, and makes datasets of them of at
// most agent.MaxEvalCases cases each, by time range. It returns the
// datasets' ids.
func (e *env) recordTurns(ctx context.Context, job string, n int) ([]string, error) {
	e.stockCalls.Store(0)
	begin := time.Now()
	var ids []string
	for part, first := 0, 0; first < n; part, first = part+1, first+agent.MaxEvalCases {
		count := min(agent.MaxEvalCases, n-first)
		from := time.Now()
		if err := e.invokeKeeper(ctx, job, first, count); err != nil {
			return nil, err
		}
		to := time.Now().Add(time.Millisecond)
		id := fmt.Sprintf("%s-%d", job, part)
		res, err := pb.NewEvalServiceClient(e.conns[0]).RecordDataset(e.auth(ctx), &pb.RecordDatasetRequest{
			DatasetId: id, AgentId: replayAgent, Channel: agent.ChannelGRPC, Outcome: agent.StatusCompleted,
			From: timestamppb.New(from), To: timestamppb.New(to), Limit: int32(count)})
		if err != nil {
			return nil, fmt.Errorf("record dataset %s: %w", id, err)
		}
		if int(res.GetCases()) != count {
			return nil, fmt.Errorf("dataset %s has %d cases, want the %d turns recorded", id, res.GetCases(), count)
		}
		ids = append(ids, id)
	}
	// GET /stock is idempotent, so an attempt a loaded machine lets time
	// out is sent again: each turn called it at least once.
	if got := e.stockCalls.Load(); got < int64(n) {
		return nil, fmt.Errorf("the stock API saw %d requests while %d turns were recorded, want at least one each", got, n)
	}
	e.note(fmt.Sprintf("recorded %d turns in %s", n, time.Since(begin).Round(100*time.Millisecond)))
	return ids, nil
}

// invokeKeeper runs the keeper's turns first … first+count-1 to their
// answers.
func (e *env) invokeKeeper(ctx context.Context, job string, first, count int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range replayRecorders {
		wg.Go(func() {
			c := pb.NewAgentServiceClient(e.conns[w%len(e.conns)])
			for i := range next {
				want := fmt.Sprintf("Depot %d keeps %d crates.", i, 7*i+3)
				res, err := c.Invoke(e.auth(ctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{
					JobId: fmt.Sprintf("%s-rec-%d", job, i), AgentId: replayAgent, Prompt: fmt.Sprintf("How many crates does depot %d keep?", i)}})
				if err == nil && (res.GetStatus() != agent.StatusCompleted || res.GetOutput() != want) {
					err = fmt.Errorf("ended %s with %q (%s), want %q", res.GetStatus(), res.GetOutput(), res.GetError().GetMessage(), want)
				}
				if err != nil {
					cancel(fmt.Errorf("record turn %d: %w", i, err))
				}
			}
		})
	}
	for i := first; i < first+count && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// replay runs the datasets as evaluations side by side (eval ids
// <prefix>-<i>) and waits for their reports. When strike is set, it is
// called once with the first evaluation's id as soon as at cases of all
// are scored, and how many are.
func (e *env) replay(ctx context.Context, prefix string, datasets []string, at int,
	strike func(ctx context.Context, evalID string, scored int) error) ([]*pb.EvalRun, error) {
	c := pb.NewEvalServiceClient(e.conns[0])
	var ids []string
	for i, ds := range datasets {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := c.StartEval(e.auth(ctx), &pb.StartEvalRequest{EvalId: id, DatasetId: ds, Concurrency: replayConcurrency}); err != nil {
			return nil, fmt.Errorf("start eval %s: %w", id, err)
		}
		ids = append(ids, id)
	}
	if strike != nil {
		var scored int
		for {
			if err := e.db.QueryRow(ctx, `SELECT count(*) FROM eval_cases WHERE tenant_id = $1 AND eval_id = ANY($2)`,
				tenant, ids).Scan(&scored); err != nil {
				return nil, fmt.Errorf("count scored cases: %w", err)
			}
			if scored >= at {
				break
			}
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return nil, fmt.Errorf("%d of %d cases scored: %w", scored, at, err)
			}
		}
		if err := strike(ctx, ids[0], scored); err != nil {
			return nil, fmt.Errorf("strike: %w", err)
		}
	}
	var runs []*pb.EvalRun
	for _, id := range ids {
		for {
			wctx, cancel := context.WithTimeout(e.auth(ctx), 30*time.Second)
			run, err := c.GetEval(wctx, &pb.GetEvalRequest{EvalId: id, Wait: true})
			cancel()
			if err == nil && run.GetStatus() == agent.EvalCompleted {
				runs = append(runs, run)
				break
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("eval %s not completed: %w", id, errors.Join(err, ctx.Err()))
			}
			// A wait that ran out, or a gateway between two workers: ask
			// again.
			if err := pause(ctx, time.Second); err != nil {
				return nil, err
			}
		}
	}
	return runs, nil
}

// killEvalWorker SIGKILLs the worker that ran the evaluation's latest
// workflow task (the first worker, if that one is gone), and starts it
// again. scored of n cases are scored.
func (e *env) killEvalWorker(ctx context.Context, workflowID string, scored, n int) error {
	p, err := e.workflowWorker(ctx, workflowID)
	if err != nil {
		return err
	}
	if p == nil {
		p = e.top.Workers[0]
	}
	if err := p.Kill(); err != nil {
		return err
	}
	e.note(fmt.Sprintf("killed %s (the evaluation's last workflow task) with %d of %d cases scored", p.Name, scored, n))
	time.Sleep(500 * time.Millisecond)
	return p.Start(ctx)
}

// replayAgrees checks that every case of the runs, n in all, agrees with
// its recording.
func replayAgrees(runs []*pb.EvalRun, n int) error {
	var errs []error
	cases := 0
	for _, r := range runs {
		for _, c := range r.GetCases() {
			cases++
			rs := c.GetReplay()
			switch {
			case !c.GetPassed() || c.GetStatus() != agent.StatusCompleted:
				errs = append(errs, fmt.Errorf("case %s ended %s, passed %t: %v", c.GetCaseId(), c.GetStatus(), c.GetPassed(), c.GetChecks()))
			case rs == nil || !rs.GetAnswerAgrees() || rs.GetMatched() != 1 || rs.GetDivergences() != 0:
				errs = append(errs, fmt.Errorf("case %s does not agree with its recording: %v", c.GetCaseId(), rs))
			}
		}
		if !r.GetPassed() {
			errs = append(errs, fmt.Errorf("eval %s did not pass", r.GetEvalId()))
		}
	}
	if cases != n {
		errs = append(errs, fmt.Errorf("%d cases scored, want %d", cases, n))
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("and %d more", len(errs)-5))
	}
	return errors.Join(errs...)
}

// sameReport compares two replays' reports, less what differs between
// any two runs: latencies, the eval and job ids, the times.
func sameReport(a, b []*pb.EvalRun) error {
	ra, rb := reportLines(a), reportLines(b)
	for i := range max(len(ra), len(rb)) {
		var la, lb string
		if i < len(ra) {
			la = ra[i]
		}
		if i < len(rb) {
			lb = rb[i]
		}
		if la != lb {
			return fmt.Errorf("line %d:\n- %s\n+ %s", i+1, la, lb)
		}
	}
	return nil
}

// reportLines is a report as lines: each evaluation's status and totals,
// then its cases by id.
func reportLines(runs []*pb.EvalRun) []string {
	var lines []string
	for i, r := range runs {
		lines = append(lines, fmt.Sprintf("eval %d: dataset %s, agent %s, versions %v, %s, passed %t",
			i, r.GetDataset(), r.GetAgentId(), r.GetVersions(), r.GetStatus(), r.GetPassed()))
		for _, t := range r.GetTotals() {
			rp := t.GetReplay()
			lines = append(lines, fmt.Sprintf("v%d: %d cases, %d passed, %d tokens, $%.6f; replay: %d cases, %d answers agree, tool agreement %.4f, %d divergences, cost delta $%.6f",
				t.GetVersion(), t.GetCases(), t.GetPassed(), t.GetTokens(), t.GetCostUsd(),
				rp.GetCases(), rp.GetAnswersAgree(), rp.GetToolAgreement(), rp.GetDivergences(), rp.GetCostDeltaUsd()))
		}
		cases := slices.Clone(r.GetCases())
		slices.SortFunc(cases, func(x, y *pb.EvalCaseResult) int {
			return strings.Compare(fmt.Sprintf("%s/%d", x.GetCaseId(), x.GetVersion()), fmt.Sprintf("%s/%d", y.GetCaseId(), y.GetVersion()))
		})
		for _, c := range cases {
			var checks []string
			for _, ch := range c.GetChecks() {
				checks = append(checks, fmt.Sprintf("%s=%t %s", ch.GetName(), ch.GetPassed(), ch.GetDetail()))
			}
			rs := c.GetReplay()
			lines = append(lines, fmt.Sprintf("case %s v%d: %s, passed %t, checks [%s], output %q, %d tokens, $%.6f; "+
				"recorded %s: answer agrees %t (%q), calls %v → %v, %d matched, %d divergences, recorded $%.6f, delta $%.6f",
				c.GetCaseId(), c.GetVersion(), c.GetStatus(), c.GetPassed(), strings.Join(checks, "; "), c.GetOutput(), c.GetTokens(), c.GetCostUsd(),
				rs.GetRecordedJobId(), rs.GetAnswerAgrees(), rs.GetRecordedAnswer(), callsOf(rs.GetRecordedCalls()), callsOf(rs.GetReplayedCalls()),
				rs.GetMatched(), rs.GetDivergences(), rs.GetRecordedCostUsd(), rs.GetCostDeltaUsd()))
		}
	}
	return lines
}

func callsOf(calls []*pb.ReplayCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.GetTool()+" "+c.GetArguments())
	}
	return out
}

// scoredOnce checks that each case of the runs has one eval_cases row
// per version, and no other row exists.
func (e *env) scoredOnce(ctx context.Context, runs []*pb.EvalRun) error {
	for _, r := range runs {
		var rows, distinct int
		if err := e.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (case_id, version)) FROM eval_cases
			WHERE tenant_id = $1 AND eval_id = $2`, tenant, r.GetEvalId()).Scan(&rows, &distinct); err != nil {
			return fmt.Errorf("count scores: %w", err)
		}
		if want := len(r.GetCases()); rows != want || distinct != want {
			return fmt.Errorf("eval %s: %d score rows (%d distinct) for %d cases, want one each", r.GetEvalId(), rows, distinct, want)
		}
	}
	return nil
}
