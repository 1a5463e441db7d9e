package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/rollout"
	"github.com/agentflow/agentflow/internal/store"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const deployUsage = `starter deploy rollout --build B [--steps 10,50,100] [--hold 5m] [--min-turns 20] [--max-wait D]
    [--error-rate-rise 0.05] [--guard-rate-rise 0.05] [--tokens-rise 0.25] [--json]
    [--dataset ID [--gate-min-pass R] [--addr HOST:PORT] [--token TOKEN]]

With --dataset, B must first pass a recorded dataset (eval record) of the token's tenant: the dataset
is replayed on the current build and on B (each evaluation pinned to its build; B takes no traffic
for it), and the rollout does not start if a case that passes on the current build fails on B.

rollout ramps build B of the worker deployment (AGENTFLOW_DEPLOYMENT_NAME) to each step's percentage of
new turns, judges each step on the turns B finished in it against the current build's, and makes B current
after the last; at the first regression beyond the thresholds it unramps B (new turns go to the current build
again; turns running on B finish there) and exits 1 with the report. It reads the builds' turns from
PostgreSQL (DATABASE_URL) and drives Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE).`

// deployCmd runs a stepped rollout of a build (internal/rollout).
func deployCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "rollout" {
		return fmt.Errorf("deploy: want rollout\n%s", deployUsage)
	}
	fs := newFlagSet("deploy rollout", deployUsage)
	address := fs.String("address", cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "127.0.0.1:7233"), "Temporal frontend host:port")
	namespace := fs.String("namespace", cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default"), "Temporal namespace")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "the PostgreSQL database (DATABASE_URL)")
	deployment := fs.String("deployment", cmp.Or(os.Getenv("AGENTFLOW_DEPLOYMENT_NAME"), contract.Product), "the worker deployment")
	o := rollout.Options{Thresholds: rollout.DefaultThresholds}
	fs.StringVar(&o.Build, "build", "", "the build to roll out")
	steps := fs.String("steps", "10,50,100", "the percentages of new turns, in order; 100 makes the build current")
	fs.DurationVar(&o.Hold, "hold", 0, "how long a step lasts before it is judged (default 5m)")
	fs.IntVar(&o.MinTurns, "min-turns", 0, "turns of the build a step is judged on (default 20)")
	fs.DurationVar(&o.MaxWait, "max-wait", 0, "how long a step waits for them before it rolls back (default 6 holds)")
	fs.Float64Var(&o.Thresholds.ErrorRateRise, "error-rate-rise", o.Thresholds.ErrorRateRise, "the error rate the build may add to the current build's")
	fs.Float64Var(&o.Thresholds.GuardRateRise, "guard-rate-rise", o.Thresholds.GuardRateRise, "the guardrail trips a turn the build may add")
	fs.Float64Var(&o.Thresholds.TokensRise, "tokens-rise", o.Thresholds.TokensRise, "the share of tokens a turn the build may add")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	api := addAPIFlags(fs)
	dataset := fs.String("dataset", "", "a recorded dataset the build must pass before it takes traffic")
	minPass := fs.Float64("gate-min-pass", 0, "with --dataset: the share of cases (0 to 1) that must pass on the build")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || o.Build == "" || *dbURL == "" {
		return fmt.Errorf("deploy rollout: want --build and --database-url (or DATABASE_URL)\n%s", deployUsage)
	}
	for _, s := range strings.Split(*steps, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("deploy rollout: --steps %q: want percentages such as 10,50,100", *steps)
		}
		o.Steps = append(o.Steps, p)
	}
	o.Deployment = *deployment
	st, err := store.Open(ctx, *dbURL, store.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	c, closeClient, err := dialTemporal(ctx, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeClient()
	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr
	d := rollout.Temporal{Client: c, Name: o.Deployment}
	if *dataset != "" {
		current, err := d.Current(ctx)
		if err != nil {
			return fmt.Errorf("deploy rollout: read the current build: %w", err)
		}
		if err := buildGate(ctx, api, *dataset, *minPass, o.Deployment, current, o.Build, out); err != nil {
			return err
		}
	}
	rep, err := rollout.Run(ctx, d, st, o, log)
	if *asJSON {
		if err := json.NewEncoder(out).Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(out, rep.Markdown())
	}
	if err != nil {
		return err
	}
	if !rep.Done {
		return exitError(1)
	}
	return nil
}

// buildGate replays a recorded dataset on the current build and on the
// candidate, each evaluation pinned to its build, and refuses the
// candidate if a case that passes on the current build fails on it.
func buildGate(ctx context.Context, api apiFlags, dataset string, minPass float64, deployment, current, build string, out io.Writer) error {
	if minPass < 0 || minPass > 1 {
		return fmt.Errorf("deploy rollout: --gate-min-pass %v: want 0 to 1", minPass)
	}
	conn, actx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	run := func(b string) (*pb.EvalRun, error) {
		req := &pb.StartEvalRequest{DatasetId: dataset}
		if b != "" {
			req.Build = deployment + ":" + b
		}
		started, err := conn.StartEval(actx, req)
		if err != nil {
			return nil, api.failed("deploy rollout --dataset", err)
		}
		fmt.Fprintf(out, "gate: evaluation %s: %d cases of dataset %s on build %s\n", started.GetEvalId(), started.GetCases(), dataset, cmp.Or(b, "(unversioned)"))
		r, err := waitEval(actx, conn, started.GetEvalId())
		if err != nil {
			return nil, api.failed("deploy rollout --dataset", err)
		}
		return r, nil
	}
	before, err := run(current)
	if err != nil {
		return err
	}
	after, err := run(build)
	if err != nil {
		return err
	}
	regressed, passed, cases := regressions(before.GetCases(), after.GetCases())
	fmt.Fprintf(out, "gate: build %s passed %d of %d cases; %d that pass on build %s fail on it\n", build, passed, cases, len(regressed), cmp.Or(current, "(unversioned)"))
	for _, r := range regressed {
		fmt.Fprintf(out, "  regressed: %s\n", r)
	}
	if len(regressed) > 0 || cases == 0 || float64(passed)/float64(cases) < minPass {
		fmt.Fprintf(out, "gate: refused: build %s takes no traffic\n", build)
		return exitError(1)
	}
	fmt.Fprintln(out, "gate: passed")
	return nil
}
