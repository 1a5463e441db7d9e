// Command worker runs an agentflow process: the Temporal worker for the
// AgentTurn and Conversation workflows and their activities, the gRPC
// gateway, or both (AGENTFLOW_ROLES), with /healthz and /metrics. It is
// configured by environment variables; see internal/server.Config. On
// SIGTERM or SIGINT it shuts down gracefully: unready first, the gateway's
// streams told to resume elsewhere, the activities in flight given up to
// AGENTFLOW_STOP_TIMEOUT to finish; a second signal ends it at once. With
// -healthcheck it probes a running worker's /healthz instead, for
// container health checks.
//
// Of agentflow's it imports internal/server and the tool kinds it adds,
// nothing else: the assembly is the server's.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/k8sjob"
)

func main() {
	healthcheck := flag.Bool("healthcheck", false, "probe this worker's /healthz (AGENTFLOW_HTTP_ADDR) and exit 0 when healthy; for container health checks")
	flag.Parse()
	if *healthcheck {
		if err := probe(os.Getenv("AGENTFLOW_HTTP_ADDR")); err != nil {
			fmt.Fprintln(os.Stderr, "worker: unhealthy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	logger, err := server.NewLogger(os.Getenv("AGENTFLOW_LOG_FORMAT"), os.Getenv("AGENTFLOW_LOG_LEVEL"))
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// The first signal shuts down gracefully (up to the stop
		// timeout); a second one ends the process at once.
		stop()
	}()

	cfg, err := server.ConfigFromEnv()
	if err != nil {
		return err
	}
	kinds, err := k8sJobs(os.Getenv("AGENTFLOW_K8S_JOBS"), os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	cfg.ToolKinds = append(cfg.ToolKinds, kinds...)
	cfg.ScriptedModel = scriptedModel()
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

// k8sJobs returns the k8s_job kind when the operator allows tenants Jobs
// (AGENTFLOW_K8S_JOBS), with the cluster's credentials from KUBECONFIG or
// the pod's service account; else none, and catalogs that name the kind
// are refused. It is added here, not in internal/server, so that only
// this command links client-go.
func k8sJobs(allowList, kubeconfig string) ([]tools.Kind, error) {
	allow, err := k8sjob.ParseAllow(allowList)
	if err != nil {
		return nil, fmt.Errorf("AGENTFLOW_K8S_JOBS: %w", err)
	}
	if allow.Empty() {
		return nil, nil
	}
	client, err := k8sjob.Client(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("AGENTFLOW_K8S_JOBS: %w", err)
	}
	return []tools.Kind{k8sjob.Kind(k8sjob.Options{Client: client, Allow: allow})}, nil
}

func probe(addr string) error {
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
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
