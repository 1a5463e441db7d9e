package server

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/asked"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/program"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
	"github.com/agentflow/agentflow/internal/tools/temporaltool"
	"github.com/agentflow/agentflow/workflows"
)

// newWorker builds the model providers and the tools, and a Temporal
// worker with the workflows and activities.
func (s *Server) newWorker() error {
	model, err := llm.New(s.cfg.Model)
	if err != nil {
		return fmt.Errorf("model providers: %w", err)
	}
	// The worker's environment and mounted files hold the secrets catalogs
	// name (env:NAME, file:/path); tools get them through this resolver, at
	// call time only, and only those the operator granted the call's
	// tenant (AGENTFLOW_SECRETS). Stdio MCP servers get a few harmless
	// variables of the environment, never the whole.
	s.mcp = mcptool.NewSessions(mcptool.SessionOptions{Logger: s.logger})
	// Turns retrieve from the tenant's collections with the same model
	// layer that embedded them.
	billing := metered.CachedBilling(s.tenants)
	gov, err := governor.New(governor.Options{Store: s.store, Limits: s.cfg.ModelLimits, Logger: s.logger, Metrics: s.metrics.Registry,
		TenantLimits: func(ctx context.Context, tenantID string) (map[string]agent.ModelLimits, error) {
			b, err := billing(ctx, tenantID)
			return b.ModelLimits, err
		}})
	if err != nil {
		return err
	}
	if !s.cfg.ModelLimits.Empty() {
		s.logger.Info("model calls governed", zap.Strings("keys", s.cfg.ModelLimits.Keys()))
	}
	// Every embedding is a model call like any other: governed, budgeted
	// and counted (metered), whichever feature makes it.
	s.gates = &metered.Gates{Store: s.store, Governor: gov, Logger: s.logger, Billing: billing}
	embedder := metered.Embedder{Gates: s.gates, Inner: model}
	if err := s.newTools(embedder); err != nil {
		return err
	}
	s.interrupts = pglive.NewInterrupts(s.store.Pool(), s.logger)
	acts, err := s.newActivities(model, gov, embedder)
	if err != nil {
		return err
	}
	s.worker = worker.New(s.client, s.cfg.TaskQueue, s.workerOptions())
	workflows.Register(s.worker)
	acts.Register(s.worker)
	return s.newNexusWorkers()
}

// newNexusWorkers makes a worker for each bound endpoint's queue, serving
// agentflow.v1.Agents as that binding.
func (s *Server) newNexusWorkers() error {
	for _, b := range s.cfg.NexusBindings {
		svc, err := nexusdoor.NewService(b, nexusdoor.Options{TurnQueue: s.cfg.TaskQueue, Intake: tenant.Intake{Tenants: s.tenants, Vault: s.vault}})
		if err != nil {
			return err
		}
		w := worker.New(s.client, b.TaskQueue, worker.Options{OnFatalError: func(err error) {
			s.logger.Error("nexus worker stopped", zap.String("task_queue", b.TaskQueue), zap.Error(err))
		}})
		w.RegisterNexusService(svc)
		s.nexus = append(s.nexus, w)
	}
	return nil
}

// newTools builds the tool registry: the built-in kinds and the
// configuration's own, with what their calls may use (the tenant's
// knowledge and memories, the granted secrets, the operator's egress
// policy, the jq sandbox).
func (s *Server) newTools(embedder metered.Embedder) error {
	var kn tools.Knowledge
	if s.knowledge != nil {
		kn = knowledge.Searcher{Store: s.knowledge, Embedder: embedder}
	}
	var err error
	s.tools, err = tools.NewRegistry(tools.Deps{
		Knowledge: kn,
		Logger:    s.logger, Secrets: s.secrets(), SecretGrants: &s.cfg.SecretGrants,
		MCPCommands: s.cfg.MCPCommands, Egress: s.egress, MCPEnv: mcptool.EnvFrom(os.Environ()), MCPSessions: s.mcp,
		Processes: s.store, Composites: s.store, ToolSearch: s.store,
		ModelProviders:      slices.Sorted(maps.Keys(s.cfg.Model.Providers)),
		JQ:                  jqproc.New(jqproc.Options{Memory: s.cfg.JQMemory, Concurrency: s.cfg.JQPrograms}),
		OpenAPIMaxSpecBytes: s.cfg.OpenAPIMaxSpecBytes,
		Memories:            s.knowledge.Memories(embedder, s.memoryModel()),
		Describe:            s.describeQueue,
	}, append(append(tools.Builtin(), temporaltool.Kinds(s.cfg.TemporalAllow)...), s.cfg.ToolKinds...)...)
	if err != nil {
		return fmt.Errorf("tool registry: %w", err)
	}
	return nil
}

// newActivities builds the activities with what they depend on: the
// model providers and their governor, the tools, the live path for
// events and interrupts, and the process's limits.
func (s *Server) newActivities(model *llm.Router, gov *governor.Governor, embedder metered.Embedder) (*activities.Activities, error) {
	return activities.New(activities.Deps{
		Store: s.store, Model: model, Tools: s.tools, Tenants: s.tenants, Logger: s.logger, Governor: gov,
		Temporal: s.client, Events: pglive.NewPublisher(s.store.Pool()), Interrupts: s.interrupts,
		Interrupt: func(ctx context.Context, streamID string) error {
			return pglive.Interrupt(ctx, s.store.Pool(), streamID)
		},
		StreamInterval: s.cfg.StreamInterval, DataInlineBytes: s.cfg.ToolDataInline,
		Hooks: s.hooks(), Scorers: s.cfg.Scorers, Vault: s.vault, TelegramAPI: s.cfg.TelegramAPI, MaxModelTimeout: s.cfg.MaxModelTimeout,
		MaxToolTimeout: s.cfg.MaxToolTimeout,
		Knowledge:      s.knowledge, Embedder: embedder,
		Memories: s.knowledge.Memories(embedder, s.memoryModel()),
		Programs: program.New(program.Options{Memory: s.cfg.ProgramMemory, Concurrency: s.cfg.Programs}),
	})
}

// workerOptions are the Temporal worker's options: its pollers, its
// heartbeat throttle, its interceptors, its stop and deadlock timeouts,
// its deployment, and what it does when the server refuses it for good.
func (s *Server) workerOptions() worker.Options {
	// Workflow pollers autoscale because that is the SDK's only mode with
	// separate pollers for the normal and the sticky queue. With a fixed
	// count every poller picks its queue, and a stale sticky-backlog hint
	// sends them all to the sticky queue: a new workflow's first task then
	// waits out a whole long poll (about a minute) on the normal one.
	wfPollers := cmp.Or(s.cfg.WorkflowPollers, defaultPollers)
	return worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: wfPollers,
			MinimumNumberOfPollers: minPollers,
			MaximumNumberOfPollers: wfPollers,
		}),
		MaxConcurrentActivityTaskPollers: cmp.Or(s.cfg.ActivityPollers, defaultPollers),
		MaxHeartbeatThrottleInterval:     heartbeatThrottle,
		Interceptors:                     []interceptor.WorkerInterceptor{&stickyReset{temporal: s.client, logger: s.logger}, asked.Interceptor()},
		WorkerStopTimeout:                s.stopTimeout(),
		DeadlockDetectionTimeout:         s.cfg.DeadlockDetectionTimeout,
		DeploymentOptions:                s.cfg.Deployment.WorkerOptions(),
		// A worker the server refuses for good (an invalid argument in
		// its polls) stops by itself; the process then shuts down and
		// fails rather than serve without a worker.
		OnFatalError: func(err error) {
			select {
			case s.fatal <- err:
			default:
			}
		},
	}
}

// heartbeatThrottle is the longest the worker holds an activity's
// heartbeat before it sends it (the SDK's default holds it for 0.8 of the
// heartbeat timeout). Tool calls heartbeat every second under a 3 s
// timeout (workflows' toolHeartbeat): sent at once, each leaves a live
// worker 2 s to spare on a loaded machine rather than 0.6 s.
const heartbeatThrottle = time.Second

// hooks are what runs around every model and tool call: tracing first,
// so that its spans hold what the hooks after it do, then the hooks the
// program that embeds the server adds (Config.Hooks).
func (s *Server) hooks() *hooks.Registry {
	return hooks.New(append([]hooks.Handler{telemetry.GenAI(s.cfg.TraceContent)}, s.cfg.Hooks...)...)
}
