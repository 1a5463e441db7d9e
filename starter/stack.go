package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// quietLogger keeps the SDK's routine logs off the terminal of a CLI.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal:", msg}, kv...)...)
}
func (quietLogger) Error(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal:", msg}, kv...)...)
}

var _ tlog.Logger = quietLogger{}

func catalogCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "apply" {
		return fmt.Errorf("usage: starter catalog apply -f DIR|FILE [-f ...] [--dry-run]")
	}
	fs := flag.NewFlagSet("catalog apply", flag.ContinueOnError)
	var files multiFlag
	fs.Var(&files, "f", "catalog file or directory (repeatable)")
	dryRun := fs.Bool("dry-run", false, "validate and print the changes without applying them")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("catalog apply: name the catalog with -f DIR|FILE")
	}
	if *dbURL == "" {
		return fmt.Errorf("catalog apply: DATABASE_URL is not set")
	}
	kinds, err := tools.NewRegistry(tools.Deps{Logger: zap.NewNop()}, tools.Builtin()...)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, *dbURL, store.Options{Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	return applyCatalog(ctx, st, kinds, out, *dryRun, files...)
}

// applyCatalog validates the catalog files and applies them all or nothing.
func applyCatalog(ctx context.Context, st *store.Store, kinds registry.Kinds, out io.Writer, dryRun bool, paths ...string) error {
	cat, err := registry.LoadFiles(kinds, paths...)
	if err != nil {
		return err
	}
	report, err := st.ApplyCatalog(ctx, cat, dryRun)
	if err != nil {
		return fmt.Errorf("apply catalog: %w", err)
	}
	for _, c := range report.Changes {
		fmt.Fprintf(out, "  %-9s %-5s %s/%s", c.Action, c.Kind, c.TenantID, c.Name)
		if c.Version > 0 {
			fmt.Fprintf(out, " v%d", c.Version)
		}
		fmt.Fprintln(out)
	}
	if dryRun {
		fmt.Fprintln(out, "dry run: nothing was applied")
	}
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// stackCmd starts a private stack, runs a command with the stack's
// settings in its environment and stops the stack: `task test` uses it so
// every test package shares one Postgres and one Temporal dev server.
func stackCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return fmt.Errorf("usage: starter stack -- COMMAND [ARGS...]")
	}
	logger, err := server.NewLogger("console", "warn")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "agentflow-stack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir: dir, TemporalPort: -1, UIPort: -1, InMemory: true, Logger: logger,
		DatabaseURL: os.Getenv("AGENTFLOW_TEST_DATABASE_URL"),
	})
	if err != nil {
		return err
	}
	defer stack.Stop()

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, os.Stderr
	cmd.Env = append(os.Environ(), devstack.Env(stack)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exitError(exit.ExitCode())
	}
	return err
}

// upCmd starts the local stack and a worker and waits for Ctrl-C.
func upCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	catalogDir := fs.String("catalog", "catalog", "catalog to apply at start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env, err := startLocal(ctx, out, *catalogDir)
	if err != nil {
		return err
	}
	defer env.close()
	env.printHowTo(out)
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// local is a running local stack with an in-process worker.
type local struct {
	stack  *devstack.Stack
	srv    *server.Server
	cfg    server.Config
	logger *zap.Logger
	done   chan error
	cancel context.CancelFunc
}

// devToken is the gateway's bearer token for tenant demo on a local stack.
const devToken = "dev-token"

// startLocal starts Postgres (unless DATABASE_URL is set) and the Temporal
// dev server (unless TEMPORAL_ADDRESS is set), a worker, and applies the
// catalog. Without a model provider key the worker serves the scripted
// demo model.
func startLocal(ctx context.Context, out io.Writer, catalogDir string) (*local, error) {
	logger, err := server.NewLogger("console", envOr("AGENTFLOW_LOG_LEVEL", "warn"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "Starting PostgreSQL and the Temporal dev server (the first run builds the temporal CLI; this takes a few minutes)…")
	stack, err := devstack.Start(ctx, devstack.Options{
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		TemporalAddress: os.Getenv("TEMPORAL_ADDRESS"),
		Namespace:       os.Getenv("TEMPORAL_NAMESPACE"),
		Logger:          logger,
	})
	if err != nil {
		return nil, err
	}
	cfg, err := server.ConfigFromEnv()
	if err != nil {
		_ = stack.Stop()
		return nil, err
	}
	cfg.DatabaseURL = stack.DatabaseURL
	cfg.TemporalAddress = stack.TemporalAddress
	cfg.Namespace = stack.Namespace
	if len(cfg.Tokens) == 0 {
		// The local stack's development token; never a default elsewhere.
		cfg.Tokens = map[string]string{devToken: "demo"}
	}
	model := demoModel(cfg)
	if model == "" && cfg.Script == "" {
		cfg.Script = "demo"
	}
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		_ = stack.Stop()
		return nil, err
	}
	l := &local{stack: stack, srv: srv, cfg: cfg, logger: logger, done: make(chan error, 1)}

	kinds := srv.Tools()
	cat, err := registry.LoadFiles(kinds, catalogDir)
	if err != nil {
		l.close()
		return nil, err
	}
	if model != "" {
		// The override bypasses the loader, which checks models.
		if _, _, err := agent.ParseModel(model); err != nil {
			l.close()
			return nil, fmt.Errorf("AGENTFLOW_DEMO_MODEL: %w", err)
		}
		for i := range cat.Tenants {
			for j := range cat.Tenants[i].Agents {
				cat.Tenants[i].Agents[j].Model = model
			}
		}
	}
	report, err := srv.Store().ApplyCatalog(ctx, cat, false)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("apply catalog: %w", err)
	}
	fmt.Fprintf(out, "Applied the catalog in %s/ (%d changes). Model: %s.\n", filepath.Clean(catalogDir), len(report.Changes), l.modelName())

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go func() { l.done <- srv.Run(runCtx) }()
	return l, nil
}

// demoModel picks the model for the sample catalog's agents from the
// provider keys in the environment; "" keeps the catalog's (and the
// scripted model answers it).
func demoModel(cfg server.Config) string {
	if m := os.Getenv("AGENTFLOW_DEMO_MODEL"); m != "" {
		return m
	}
	switch {
	case cfg.Script != "":
		return ""
	case cfg.Model.OpenAIAPIKey != "":
		return "openai:gpt-4o-mini"
	case cfg.Model.AnthropicAPIKey != "":
		return "anthropic:claude-3-5-haiku-latest"
	case cfg.Model.OllamaHost != "":
		return "ollama:llama3.1"
	}
	return ""
}

func (l *local) printHowTo(out io.Writer) {
	fmt.Fprintf(out, `
agentflow is running.
  Temporal:  %s (namespace %s)
  Web UI:    %s
  Postgres:  %s
  Model:     %s
  gRPC API:  %s (token %s for tenant demo)

Try:
  export TEMPORAL_ADDRESS=%s DATABASE_URL='%s'
  go run ./starter run --tenant demo "What is 12.5 * 4?"
  go run ./starter chat --addr %s "What is 12.5 * 4?"
  .bin/temporal workflow list --address %s
`, l.stack.TemporalAddress, l.stack.Namespace, orNone(l.stack.UIURL), l.stack.DatabaseURL, l.modelName(),
		orNone(l.srv.GRPCAddr()), devToken,
		l.stack.TemporalAddress, l.stack.DatabaseURL, orNone(l.srv.GRPCAddr()), l.stack.TemporalAddress)
}

func (l *local) modelName() string {
	if l.cfg.Script != "" {
		return "scripted (offline; set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST for a real model)"
	}
	if m := demoModel(l.cfg); m != "" {
		return m
	}
	return "as in the catalog"
}

func (l *local) close() {
	if l.cancel != nil {
		l.cancel()
		if err := <-l.done; err != nil {
			l.logger.Warn("worker stopped with an error", zap.Error(err))
		}
		l.cancel = nil
	}
	l.srv.Close()
	if err := l.stack.Stop(); err != nil {
		l.logger.Warn("stop local stack", zap.Error(err))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// demoCmd runs the sample session on a local stack.
func demoCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	catalogDir := fs.String("catalog", "catalog", "catalog to apply at start")
	wait := fs.Bool("wait", os.Getenv("CI") != "true", "keep running after the session until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env, err := startLocal(ctx, out, *catalogDir)
	if err != nil {
		return err
	}
	defer env.close()

	// A session of its own per run: a conversation left by an earlier run
	// may belong to a worker on another task queue that is gone.
	run := newJobID()
	prompts := []string{"What is 12.5 * 4?", "What is (1.1 + 2.2) * 3 / 4?"}
	for i, p := range prompts {
		req := agent.TurnRequest{TenantID: "demo", SessionID: "demo-" + run, JobID: fmt.Sprintf("demo-%s-%d", run, i+1), Prompt: p}
		req.Normalize()
		fmt.Fprintf(out, "\n> %s\n", p)
		if err := env.chat(ctx, out, req); err != nil {
			return err
		}
	}
	if err := env.approvalDemo(ctx, out); err != nil {
		return err
	}
	if !*wait {
		return nil
	}
	env.printHowTo(out)
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// chat streams a turn through the local gateway, as any client would.
func (l *local) chat(ctx context.Context, out io.Writer, req agent.TurnRequest) error {
	addr, token := l.srv.GRPCAddr(), devToken
	api := apiFlags{addr: &addr, token: &token}
	c, closeConn, err := api.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	return chat(api.ctx(ctx), c, &pb.TurnRequest{JobId: req.JobID, SessionId: req.SessionID, AgentId: req.AgentID, Prompt: req.Prompt},
		out, os.Stderr)
}

// approvalDemo runs a turn of the ops agent, whose calculator needs a
// person's approval, and approves the call through the API as that person.
func (l *local) approvalDemo(ctx context.Context, out io.Writer) error {
	prompt := "What is 1200 * 1.07?"
	job := "demo-" + newJobID() + "-ops"
	fmt.Fprintf(out, "\n> (agent ops, whose calculator needs approval) %s\n", prompt)
	addr, token := l.srv.GRPCAddr(), devToken
	api := apiFlags{addr: &addr, token: &token}
	c, closeConn, err := api.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	actx := api.ctx(ctx)
	streamID := "turn/demo/" + job
	approved := make(chan error, 1)
	go func() {
		// A reviewer elsewhere: waits for the call, then approves it.
		for {
			resp, err := c.ListPendingApprovals(actx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
			if err == nil && len(resp.GetApprovals()) > 0 {
				p := resp.GetApprovals()[0]
				_, err = c.Approve(actx, &pb.ApproveRequest{StreamId: streamID, CallId: p.GetCallId(), Approved: true,
					Approver: "demo-reviewer", Reason: "the figures look right"})
				approved <- err
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-actx.Done():
				approved <- actx.Err()
				return
			}
		}
	}()
	if err := chat(actx, c, &pb.TurnRequest{JobId: job, AgentId: "ops", Prompt: prompt}, out, os.Stderr); err != nil {
		return err
	}
	if err := <-approved; err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	fmt.Fprintln(out, "  (approved by demo-reviewer through the gRPC API: starter approve --stream "+streamID+")")
	return nil
}
