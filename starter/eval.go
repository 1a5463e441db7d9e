package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/gateway/evalapi"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const evalUsage = `starter eval run (-f DATASET | --dataset ID) [--agent A] [--version N] [--against M] [--concurrency C] [--id ID] [--report FILE]
starter eval record --agent A --since DURATION | --from T --to T [--channel C] [--outcome S] [--sample RATE] [--limit N] [--judge RUBRIC] [--id ID]
starter eval show ID [--report FILE]
starter eval compare ID_A ID_B

run starts an evaluation of the dataset (YAML; see examples/evals/), or of a dataset recorded
by record, on the agent's active version, or --version N, and with --against M on a second
version to compare; it waits, prints the Markdown report, writes --report (.md or .html) and
exits 1 when a case failed. record makes a dataset of the tenant's recorded turns (by
reference) and prints its id; a recorded case replays its turn with the recorded tool results.`

// evalCmd runs evaluations and shows their reports (EvalService; role admin).
func evalCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("eval: a subcommand is required\n%s", evalUsage)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "run":
		return evalRun(ctx, rest, out)
	case "record":
		return evalRecord(ctx, rest, out)
	case "show":
		return evalShow(ctx, rest, out)
	case "compare":
		return evalCompare(ctx, rest, out)
	default:
		return fmt.Errorf("eval: unknown subcommand %q\n%s", sub, evalUsage)
	}
}

func evalRun(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval run", flag.ContinueOnError)
	api := addAPIFlags(fs)
	file := fs.String("f", "", "the dataset file")
	datasetID := fs.String("dataset", "", "a recorded dataset's id (eval record), instead of -f")
	agentID := fs.String("agent", "", "the agent (default: the dataset's)")
	version := fs.Int("version", 0, "the agent version to evaluate (default: the active one)")
	against := fs.Int("against", 0, "a second version, to compare with the first")
	concurrency := fs.Int("concurrency", 0, "cases run at once, 1 to 16 (default 4)")
	id := fs.String("id", "", "the evaluation's id (default: a new one; the same id attaches to its run)")
	report := fs.String("report", "", "also write the report to this file: .md for Markdown, .html for a page")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*file == "") == (*datasetID == "") {
		return fmt.Errorf("eval run: -f DATASET or --dataset ID is required (one)\n%s", evalUsage)
	}
	req := &pb.StartEvalRequest{DatasetId: *datasetID, AgentId: *agentID, Concurrency: int32(*concurrency), EvalId: *id}
	if *file != "" {
		data, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("eval run: %w", err)
		}
		// Checked here too, so that a malformed case is named before a call.
		if _, err := evals.Parse(data); err != nil {
			return fmt.Errorf("eval run: %s: %w", *file, err)
		}
		req.Dataset = string(data)
	}
	switch {
	case *against != 0 && *version == 0:
		return fmt.Errorf("eval run: --against needs --version (the first of the two)")
	case *version != 0:
		req.Versions = append(req.Versions, int32(*version))
		if *against != 0 {
			req.Versions = append(req.Versions, int32(*against))
		}
	}
	c, ctx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	started, err := c.StartEval(ctx, req)
	if err != nil {
		return api.failed("eval run", err)
	}
	fmt.Fprintf(os.Stderr, "evaluation %s: %d cases on %s v%v (workflow %s)\n", started.GetEvalId(), started.GetCases(),
		cmp.Or(*agentID, "the dataset's agent"), started.GetVersions(), started.GetWorkflowId())
	run, err := waitEval(ctx, c, started.GetEvalId())
	if err != nil {
		return api.failed("eval run", err)
	}
	return showEval(out, run, *report)
}

func evalRecord(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval record", flag.ContinueOnError)
	api := addAPIFlags(fs)
	agentID := fs.String("agent", "", "the agent whose turns to take (required)")
	since := fs.Duration("since", 0, "take the turns of this last while (e.g. 24h), instead of --from and --to")
	from := fs.String("from", "", "the first completion time to take (RFC 3339)")
	to := fs.String("to", "", "the completion time to stop before (RFC 3339; default now)")
	channel := fs.String("channel", "", "take only the turns of this channel (grpc, http, openai, ...)")
	outcome := fs.String("outcome", "", "take only the turns with this status: completed, failed or rejected")
	sample := fs.Float64("sample", 0, "the share of matching turns to take, chosen by job id (default all)")
	limit := fs.Int("limit", 0, "at most this many cases, oldest first (default 500)")
	id := fs.String("id", "", "the dataset's id (default: a new one; the same id answers the stored dataset)")
	judge := fs.String("judge", "", "also have a judge model grade each replayed answer by this rubric")
	judgeModel := fs.String("judge-model", "", "the judge's model, provider:model (default: the agent's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req := &pb.RecordDatasetRequest{DatasetId: *id, AgentId: *agentID, Channel: *channel, Outcome: *outcome,
		SampleRate: *sample, Limit: int32(*limit), JudgeRubric: *judge, JudgeModel: *judgeModel}
	end := time.Now()
	if *to != "" {
		t, err := time.Parse(time.RFC3339, *to)
		if err != nil {
			return fmt.Errorf("eval record: --to: %w", err)
		}
		end = t
	}
	req.To = timestamppb.New(end)
	switch {
	case *since > 0 && *from != "":
		return fmt.Errorf("eval record: give --since or --from, not both")
	case *since > 0:
		req.From = timestamppb.New(end.Add(-*since))
	case *from != "":
		t, err := time.Parse(time.RFC3339, *from)
		if err != nil {
			return fmt.Errorf("eval record: --from: %w", err)
		}
		req.From = timestamppb.New(t)
	default:
		return fmt.Errorf("eval record: --since or --from is required\n%s", evalUsage)
	}
	c, ctx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	res, err := c.RecordDataset(ctx, req)
	if err != nil {
		return api.failed("eval record", err)
	}
	fmt.Fprintf(os.Stderr, "dataset %s: %d recorded turns; run it with: starter eval run --dataset %s --version N\n",
		res.GetDatasetId(), res.GetCases(), res.GetDatasetId())
	fmt.Fprintln(out, res.GetDatasetId())
	return nil
}

// waitEval waits for an evaluation to complete, a minute per call, and
// says how far it is between calls.
func waitEval(ctx context.Context, c pb.EvalServiceClient, id string) (*pb.EvalRun, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		run, err := c.GetEval(wctx, &pb.GetEvalRequest{EvalId: id, Wait: true})
		cancel()
		switch {
		case err == nil && run.GetStatus() == "completed":
			return run, nil
		case err == nil:
			fmt.Fprintf(os.Stderr, "  %d results so far\n", len(run.GetCases()))
		case status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil:
		default:
			return nil, err
		}
	}
}

// showEval prints a run's Markdown report, writes the report file, and
// fails (exit status 1) when a case failed.
func showEval(out io.Writer, p *pb.EvalRun, report string) error {
	fmt.Fprint(out, p.GetReportMarkdown())
	if err := writeEvalReport(p, report); err != nil {
		return err
	}
	if p.GetStatus() != "completed" {
		fmt.Fprintf(os.Stderr, "evaluation %s is still running\n", p.GetEvalId())
		return nil
	}
	if !p.GetPassed() {
		failed := 0
		for _, c := range p.GetCases() {
			if !c.GetPassed() {
				failed++
			}
		}
		fmt.Fprintf(os.Stderr, "evaluation %s failed: %d of %d case runs did not pass\n", p.GetEvalId(), failed, len(p.GetCases()))
		return exitError(1)
	}
	return nil
}

// writeEvalReport writes a run's report to the file: a page for .html,
// else Markdown; nothing without a file.
func writeEvalReport(p *pb.EvalRun, report string) error {
	if report == "" {
		return nil
	}
	text := p.GetReportMarkdown()
	if strings.EqualFold(filepath.Ext(report), ".html") {
		var err error
		if text, err = evals.HTML(evalapi.FromPBEvalRun(p)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(report, []byte(text), 0o644); err != nil {
		return fmt.Errorf("eval: write the report: %w", err)
	}
	return nil
}

func evalShow(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval show", flag.ContinueOnError)
	api := addAPIFlags(fs)
	report := fs.String("report", "", "also write the report to this file: .md or .html")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("eval show: one evaluation id is required\n%s", evalUsage)
	}
	c, ctx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	run, err := c.GetEval(ctx, &pb.GetEvalRequest{EvalId: fs.Arg(0)})
	if err != nil {
		return api.failed("eval show", err)
	}
	return showEval(out, run, *report)
}

func evalCompare(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval compare", flag.ContinueOnError)
	api := addAPIFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("eval compare: two evaluation ids are required\n%s", evalUsage)
	}
	c, ctx, closeConn, err := api.dialEval(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	var runs [2]*pb.EvalRun
	for i := range runs {
		if runs[i], err = c.GetEval(ctx, &pb.GetEvalRequest{EvalId: fs.Arg(i)}); err != nil {
			return api.failed("eval compare", err)
		}
	}
	fmt.Fprint(out, evals.Compare(evalapi.FromPBEvalRun(runs[0]), evalapi.FromPBEvalRun(runs[1])))
	return nil
}
