package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// gate is catalog apply's deploy gate: the catalog's new agent versions
// are staged (stored, not serving), a stored dataset — real turns,
// recorded (eval record) — is replayed on the active and the staged
// version of each, and the apply goes on only if no case that passes on
// the active version fails on the staged one, and the staged one passes
// at least minPass of the cases.
type gate struct {
	dataset string
	minPass float64
	report  string
}

// check stages the catalog and evaluates what it staged; an error
// refuses the apply, naming the conversations that regressed.
func (g gate) check(ctx context.Context, api apiFlags, files map[string]string, allowUnreachable bool, out io.Writer) error {
	if g.minPass < 0 || g.minPass > 1 {
		return fmt.Errorf("catalog apply: --gate-min-pass %v: want 0 to 1", g.minPass)
	}
	staged, err := applyCatalog(ctx, api, &pb.UpsertCatalogRequest{Files: files, AllowUnreachable: allowUnreachable, Stage: true})
	if err != nil {
		return err
	}
	var agents []*pb.CatalogChange
	for _, c := range staged.GetChanges() {
		if c.GetKind() == "agent" && c.GetAction() == "staged" {
			agents = append(agents, c)
			fmt.Fprintf(out, "  staged    agent %s v%d\n", c.GetName(), c.GetVersion())
		}
	}
	if len(agents) == 0 {
		fmt.Fprintln(out, "gate: no agent has a new version to evaluate")
		return nil
	}
	conn, actx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	cat, _, closeCat, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeCat()
	listed, err := cat.ListAgents(actx, &pb.ListAgentsRequest{})
	if err != nil {
		return api.failed("catalog apply --gate", err)
	}
	var refused []string
	for _, c := range agents {
		i := slices.IndexFunc(listed.GetAgents(), func(a *pb.AgentInfo) bool { return a.GetId() == c.GetName() })
		if i < 0 {
			return fmt.Errorf("catalog apply --gate: agent %s has a staged version but no active one", c.GetName())
		}
		active := listed.GetAgents()[i].GetVersion()
		started, err := conn.StartEval(actx, &pb.StartEvalRequest{DatasetId: g.dataset, AgentId: c.GetName(), Versions: []int32{active, c.GetVersion()}})
		if err != nil {
			return api.failed("catalog apply --gate", err)
		}
		fmt.Fprintf(out, "gate: evaluation %s: %d cases of dataset %s on %s v%d (active) and v%d (staged)\n",
			started.GetEvalId(), started.GetCases(), g.dataset, c.GetName(), active, c.GetVersion())
		run, err := waitEval(actx, conn, started.GetEvalId())
		if err != nil {
			return api.failed("catalog apply --gate", err)
		}
		if g.report != "" {
			ext := filepath.Ext(g.report)
			if err := writeEvalReport(run, strings.TrimSuffix(g.report, ext)+"-"+c.GetName()+ext); err != nil {
				return err
			}
		}
		regressed, passed, cases := gateVerdict(run, active, c.GetVersion())
		fmt.Fprintf(out, "gate: %s v%d passed %d of %d cases; %d that pass on v%d fail on it\n", c.GetName(), c.GetVersion(), passed, cases, len(regressed), active)
		for _, r := range regressed {
			fmt.Fprintf(out, "  regressed: %s\n", r)
		}
		if cases == 0 {
			fmt.Fprintf(out, "gate: the dataset has no case %s v%d ran: nothing shows it does no harm\n", c.GetName(), c.GetVersion())
		}
		if len(regressed) > 0 || cases == 0 || float64(passed)/float64(cases) < g.minPass {
			refused = append(refused, fmt.Sprintf("%s v%d", c.GetName(), c.GetVersion()))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(out, "gate: refused: %s stays staged, not serving; nothing was applied\n", strings.Join(refused, ", "))
		return exitError(1)
	}
	fmt.Fprintln(out, "gate: passed")
	return nil
}

// gateVerdict reads an evaluation of the active and the staged version:
// the cases that pass on the active and fail on the staged one, and how
// many of the staged one's cases passed.
func gateVerdict(run *pb.EvalRun, active, staged int32) (regressed []string, passed, cases int) {
	of := func(v int32) []*pb.EvalCaseResult {
		var out []*pb.EvalCaseResult
		for _, c := range run.GetCases() {
			if c.GetVersion() == v {
				out = append(out, c)
			}
		}
		return out
	}
	return regressions(of(active), of(staged))
}

// regressions compares the same cases run before and after a change: the
// cases (with the recorded conversation each replays, when its id is not
// that) that pass before and fail after, and how many passed after.
func regressions(before, after []*pb.EvalCaseResult) (regressed []string, passed, cases int) {
	passedBefore := map[string]bool{}
	for _, c := range before {
		passedBefore[c.GetCaseId()] = c.GetPassed()
	}
	for _, c := range after {
		cases++
		if c.GetPassed() {
			passed++
			continue
		}
		if passedBefore[c.GetCaseId()] {
			name := c.GetCaseId()
			if r := c.GetReplay(); r != nil && r.GetRecordedJobId() != "" && r.GetRecordedJobId() != name {
				name += " (conversation " + r.GetRecordedJobId() + ")"
			}
			regressed = append(regressed, name)
		}
	}
	return regressed, passed, cases
}
