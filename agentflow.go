// Package agentflow is agentflow's public Go API: build a worker binary of
// your own — agentflow's runtime (the turn and conversation workflows,
// their activities, the gateway) with your Go functions as tools, tool
// kinds and model providers of your own, and hooks around every model
// and tool call.
//
//	func main() {
//		agentflow.Main(agentflow.Options{
//			Tools: []agentflow.Tool{agentflow.Func("weather", "Today's weather in a city.", weather, agentflow.ReadOnly())},
//			Hooks: []agentflow.Hook{noSecrets},
//		})
//	}
//
// The worker is configured by the environment variables of the shipped
// one (docs/reference/configuration.md); a catalog grants an agent your
// tool by its kind (`kind: weather`). The shipped worker (./worker) is
// this package with the built-in set.
//
// Compatibility: the names this package exports keep their meaning
// within a major version; new fields and functions may be added. Types
// it re-exports from the runtime (ToolSpec, ToolDeps, Call, Output,
// Message…) are part of that promise as far as their exported fields go.
package agentflow

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tmc/langchaingo/llms"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/server"
)

// Options are what a worker adds to agentflow's runtime.
type Options struct {
	// Tools are tool kinds beside the built-in ones: Go functions (Func)
	// and kinds of your own. A catalog names them by kind.
	Tools []Tool
	// Hooks run around every turn, model call and tool call, after
	// tracing, in order (Hook).
	Hooks []Hook
	// Models are model providers of your own, by the name agents give
	// them in a catalog ("name:model"): any langchaingo model — one of
	// its many providers, or your own implementation of llms.Model.
	Models map[string]llms.Model
	// Scorers are checks of your own on every case this worker's
	// evaluations score, beside the dataset's expectations (Scorer).
	Scorers []Scorer
	// ScriptedModel serves AGENTFLOW_SCRIPT's offline model, for test and
	// demo builds only; nil: a worker that refuses a script.
	ScriptedModel ScriptedModel
}

// ScriptedModel serves the offline scripted model a test or demo build
// links in (the shipped worker's -tags scripted).
type ScriptedModel = server.ScriptedModel

// Main runs a worker process with o and exits: configured by the
// environment, stopped gracefully by SIGTERM or SIGINT (a second signal
// ends it at once). With -healthcheck it probes a running worker's
// /healthz instead, for container health checks.
func Main(o Options) {
	healthcheck := flag.Bool("healthcheck", false, "probe this worker's /healthz (AGENTFLOW_HTTP_ADDR) and exit 0 when healthy; for container health checks")
	flag.Parse()
	if *healthcheck {
		if err := probe(os.Getenv("AGENTFLOW_HTTP_ADDR")); err != nil {
			fmt.Fprintln(os.Stderr, "worker: unhealthy:", err)
			os.Exit(1)
		}
		return
	}
	logger, err := server.NewLogger(os.Getenv("AGENTFLOW_LOG_FORMAT"), os.Getenv("AGENTFLOW_LOG_LEVEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// The first signal shuts down gracefully (up to the stop
		// timeout); a second one ends the process at once.
		stop()
	}()
	err = Run(ctx, o, logger)
	stop()
	_ = logger.Sync()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// Run runs a worker with o, configured by the environment, until ctx is
// done, logging to logger; for a program that owns its process.
func Run(ctx context.Context, o Options, logger *zap.Logger) error {
	cfg, err := server.ConfigFromEnv()
	if err != nil {
		return err
	}
	cfg.ToolKinds = append(cfg.ToolKinds, o.Tools...)
	cfg.Hooks = append(cfg.Hooks, o.Hooks...)
	cfg.Scorers = append(cfg.Scorers, o.Scorers...)
	cfg.ScriptedModel = o.ScriptedModel
	if len(o.Models) > 0 {
		cfg.Model.Providers = o.Models
	}
	if cfg.WorkflowCacheSize > 0 {
		// A process-wide setting of the SDK, before any worker starts.
		worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	}
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	logger.Info("worker ready", zap.String("temporal", cfg.TemporalAddress), zap.String("http", cfg.HTTPAddr))
	return srv.Run(ctx)
}

// probe asks a worker's /healthz whether it is healthy.
func probe(addr string) error {
	addr = cmp.Or(addr, "127.0.0.1:9090")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("AGENTFLOW_HTTP_ADDR=%q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered %s", resp.Status)
	}
	return nil
}
