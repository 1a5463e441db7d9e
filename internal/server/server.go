package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/deploy"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/jqproc"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/payloadstore"
	"github.com/agentflow/agentflow/internal/program"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/workflows"
)

// Server is one worker process's assembly.
type Server struct {
	cfg    Config
	logger *zap.Logger
	client client.Client
	// clientOpts are client's options.
	clientOpts client.Options
	store      *store.Store
	knowledge  *knowledge.Store // its vector index is reported in /healthz
	tools      *tools.Registry
	mcp        *tools.MCPSessions
	worker     worker.Worker
	scripted   *scripted.Server
	http       *http.Server
	httpLn     net.Listener
	hub        *pglive.Hub
	// interrupts stops this worker's model calls of cancelled turns; nil
	// without the worker role.
	interrupts *pglive.Interrupts
	follower   *eventlog.Follower
	vault      *redact.Vault
	grpc       *grpc.Server
	grpcLn     net.Listener
	oidc       *oidcauth.Verifier
	api        *gateway.HTTPAPI
	apiHTTP    *http.Server
	apiLn      net.Listener
	tenants    *tenant.Cache
	egress     *egress.Operator
	metrics    *metrics.Metrics
	tracing    *telemetry.Tracing
	svc        *gateway.Service
	// gates are what every model call outside a turn's own passes (the
	// tenant's budgets, the provider governor, the usage ledger): the
	// worker's embeddings and the gateway's search embeddings alike.
	gates *metered.Gates
	// gatewayClient is the gateway's own Temporal client when it may not
	// share the worker's (gatewayTemporal); nil when it shares it.
	gatewayClient client.Client
	// draining is set once the process is shutting down: /healthz says
	// unready from then on.
	draining atomic.Bool
	// fatal has the worker's error when it stopped by itself.
	fatal chan error
	// registered tracks the build's registration (versioned workers).
	registered deploy.Registration
	// payloads keeps the client's large payloads in the object store; nil
	// without one.
	payloads *payloadstore.Driver
}

// New connects to Temporal and Postgres (applying migrations), builds the
// model providers and tools, and registers the workflows and activities.
// Misconfiguration fails here, not at the first turn.
func New(ctx context.Context, cfg Config, logger *zap.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: logger, fatal: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.startScriptedModel(); err != nil {
		return nil, err
	}
	if s.metrics, err = metrics.New(logger); err != nil {
		return nil, err
	}
	if err := s.startTracing(ctx); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	if err := s.newEgress(ctx); err != nil {
		return nil, err
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if err := s.checkSearchAttributes(ctx); err != nil {
		return nil, err
	}
	if err := s.checkDeployment(ctx); err != nil {
		return nil, err
	}
	s.tenants = tenant.NewCache(s.store, s.egress, logger)
	s.tenants.PIIKey = cfg.VaultKey
	var sealer *guard.Sealer
	if len(cfg.VaultKey) > 0 {
		if sealer, err = guard.NewSealer(cfg.VaultKey); err != nil {
			return nil, err
		}
	}
	s.vault = redact.New(s.store, sealer)
	s.tenants.Metrics = tenant.NewMetrics(s.metrics.Registry)
	streamMetrics := pglive.NewMetrics(s.metrics.Registry, metrics.LatencyBuckets)
	s.hub = pglive.NewHub(s.store.Pool(), logger)
	s.hub.Metrics = streamMetrics
	s.follower = eventlog.NewFollower(s.client, s.hub, SDKLogger(logger), 0)
	s.follower.Metrics = streamMetrics
	if err := s.newWorker(); err != nil {
		return nil, err
	}
	if s.cfg.Has(RoleWorker) {
		if err := s.scheduleRetention(ctx); err != nil {
			return nil, err
		}
	}
	if s.cfg.Has(RoleGateway) {
		if err := s.newGateway(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.newHTTP(); err != nil {
		return nil, err
	}
	return s, nil
}

// startScriptedModel serves the scripted model in-process when the
// configuration asks for it, and points the openai provider at it.
func (s *Server) startScriptedModel() error {
	if s.cfg.Script == "auto" {
		s.cfg.Script = ""
		if !s.cfg.Model.HasCredentials() {
			s.cfg.Script = "demo"
		}
	}
	if s.cfg.Script == "" {
		return nil
	}
	script, err := loadScript(s.cfg.Script)
	if err != nil {
		return err
	}
	s.scripted, err = scripted.Start("127.0.0.1:0", script, scripted.Options{})
	if err != nil {
		return fmt.Errorf("start scripted model: %w", err)
	}
	s.cfg.Model.OpenAIBaseURL = s.scripted.URL()
	s.cfg.Model.OpenAIAPIKey = "scripted"
	s.logger.Info("serving the scripted model", zap.String("url", s.scripted.URL()), zap.String("script", s.cfg.Script))
	return nil
}

// startTracing takes the configuration's tracer provider, or builds one
// from the OTEL_* variables (none when they ask for no export).
func (s *Server) startTracing(ctx context.Context) error {
	if s.cfg.TracerProvider != nil {
		s.tracing = telemetry.New(s.cfg.TracerProvider)
		return nil
	}
	service := telemetry.ServiceWorker
	if !s.cfg.Has(RoleWorker) {
		service = telemetry.ServiceGateway
	}
	var err error
	if s.tracing, err = telemetry.FromEnv(ctx, service); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	if s.tracing.Enabled() {
		s.logger.Info("exporting traces over OTLP", zap.String("service", service))
	}
	return nil
}

// listen opens the gateway's (gRPC and HTTP APIs) and the admin
// endpoint's listeners first, so that the egress policy knows the ports
// they really took.
func (s *Server) listen() error {
	var err error
	if s.cfg.Has(RoleGateway) {
		if s.grpcLn, err = net.Listen("tcp", s.cfg.GRPCAddr); err != nil {
			return fmt.Errorf("listen on %s (AGENTFLOW_GRPC_ADDR): %w", s.cfg.GRPCAddr, err)
		}
		if on(s.cfg.HTTPAPIAddr) {
			if s.apiLn, err = net.Listen("tcp", s.cfg.HTTPAPIAddr); err != nil {
				return fmt.Errorf("listen on %s (AGENTFLOW_HTTP_API_ADDR): %w", s.cfg.HTTPAPIAddr, err)
			}
		}
	}
	if on(s.cfg.HTTPAddr) {
		if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
		}
	}
	return nil
}

// newEgress builds the operator's egress policy, which bounds every
// tenant's allowlist, for the tools' clients and the catalogs' checks:
// what EgressAllow opens, and the platform's own addresses closed.
func (s *Server) newEgress(ctx context.Context) error {
	platform, err := s.platformAddrs()
	if err != nil {
		return err
	}
	if s.egress, err = egress.NewOperator(ctx, egress.OperatorConfig{Allow: s.cfg.EgressAllow, Platform: platform}); err != nil {
		return fmt.Errorf("egress policy: %w", err)
	}
	closed := make([]string, len(platform))
	for i, p := range platform {
		closed[i] = p.Addr
	}
	s.logger.Info("egress policy", zap.Strings("opened", s.cfg.EgressAllow), zap.Strings("platform", closed))
	return nil
}

// temporalHTTPPort is the Temporal frontend's HTTP API port where the
// server's configuration does not choose another (frontend rpc.httpPort,
// 7243 in the server's config templates and its docker image). The dev
// server picks a free one unless told: devstack tells it, and hands the
// address on (TemporalHTTPAddr).
const temporalHTTPPort = "7243"

// platformAddrs are the platform's own listening addresses this process
// knows: the Temporal frontend (gRPC, and HTTP where TemporalHTTPAddr
// says, by default at the server's default port),
// Postgres, the gateway's gRPC and HTTP APIs, the health and metrics
// endpoint, the scripted model it serves, and AGENTFLOW_PLATFORM_ADDRS. A
// listener the process gains belongs here too.
func (s *Server) platformAddrs() ([]egress.PlatformAddr, error) {
	temporal := strings.TrimPrefix(s.cfg.TemporalAddress, "dns:///")
	out := []egress.PlatformAddr{{Addr: temporal, What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"}}
	if s.cfg.TemporalHTTPAddr != "" {
		out = append(out, egress.PlatformAddr{Addr: s.cfg.TemporalHTTPAddr, What: "the Temporal frontend's HTTP API", From: "AGENTFLOW_TEMPORAL_HTTP_ADDR"})
	} else if host, _, err := net.SplitHostPort(temporal); err == nil {
		out = append(out, egress.PlatformAddr{Addr: net.JoinHostPort(host, temporalHTTPPort), What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"})
	}
	db, err := pgconn.ParseConfig(s.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	seen := map[string]bool{}
	for _, h := range append([]*pgconn.FallbackConfig{{Host: db.Host, Port: db.Port}}, db.Fallbacks...) {
		addr := net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
		// A Unix socket is no TCP address; a host comes once per TLS mode.
		if !strings.HasPrefix(h.Host, "/") && !seen[addr] {
			seen[addr] = true
			out = append(out, egress.PlatformAddr{Addr: addr, What: "Postgres", From: "DATABASE_URL"})
		}
	}
	// A gateway address this process does not listen on is another
	// process's on this machine, most likely.
	if a := listenedOr(s.GRPCAddr(), s.cfg.GRPCAddr); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the gateway's gRPC API", From: "AGENTFLOW_GRPC_ADDR"})
	}
	if a := listenedOr(s.HTTPAPIAddr(), s.cfg.HTTPAPIAddr); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the gateway's HTTP API", From: "AGENTFLOW_HTTP_API_ADDR"})
	}
	if u, err := url.Parse(s.cfg.ObjectStore.Endpoint); err == nil && s.cfg.ObjectStore.Enabled() && u.Host != "" {
		// Its bucket holds every tenant's large data.
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		}
		out = append(out, egress.PlatformAddr{Addr: addr, What: "the object store", From: objstore.EnvEndpoint})
	}
	if a := s.HTTPAddr(); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the health and metrics endpoint", From: "AGENTFLOW_HTTP_ADDR"})
	}
	if s.scripted != nil {
		if u, err := url.Parse(s.scripted.URL()); err == nil {
			out = append(out, egress.PlatformAddr{Addr: u.Host, What: "the scripted model", From: "AGENTFLOW_SCRIPT"})
		}
	}
	for _, a := range s.cfg.PlatformAddrs {
		out = append(out, egress.PlatformAddr{Addr: a, What: "a platform address", From: egress.EnvPlatformAddrs})
	}
	return out, nil
}

// listenedOr is the address a listener took, or else the configured one
// when it names a port (not "off", not port 0).
func listenedOr(listened, configured string) string {
	if listened != "" {
		return listened
	}
	if _, port, err := net.SplitHostPort(configured); err == nil && port != "0" {
		return configured
	}
	return ""
}

// on reports whether an address setting asks for a listener.
func on(addr string) bool { return addr != "" && addr != "off" }

// openObjects builds the object store, when one is configured, and
// reaches its bucket: a misnamed bucket or a refused credential stops
// the process at its start, not at its first large blob.
func (s *Server) openObjects(ctx context.Context) (*objstore.Store, error) {
	if !s.cfg.ObjectStore.Enabled() {
		return nil, nil
	}
	objects, err := objstore.New(ctx, s.cfg.ObjectStore)
	if err != nil {
		return nil, err
	}
	if err := objects.Check(ctx); err != nil {
		return nil, err
	}
	s.logger.Info("object store", zap.Stringer("store", objects.Config()), zap.Int64("min_blob_bytes", objects.Config().MinBlobBytes),
		zap.Int64("min_payload_bytes", objects.Config().PayloadThreshold()))
	return objects, nil
}

// checkDeployment asks the Temporal server whether it takes a versioned
// worker's deployment and build (deploy.Check) before the worker polls,
// and warns of an unversioned worker on a shared server.
func (s *Server) checkDeployment(ctx context.Context) error {
	if !s.cfg.Has(RoleWorker) {
		return nil
	}
	if !s.cfg.Deployment.On() {
		if !Loopback(s.cfg.TemporalAddress) {
			// Turns are pinned to the build that started them only on a
			// versioned worker; an unversioned one replays a turn in
			// flight on whatever code it runs (workflows/doc.go).
			s.logger.Warn("worker is unversioned: drain the turns in flight before deploying a change, or set the deployment and build to run Worker Deployment Versioning",
				zap.String("temporal", s.cfg.TemporalAddress), zap.String("deployment_env", deploy.EnvDeploymentName), zap.String("build_env", deploy.EnvBuildID))
		}
		return nil
	}
	return deploy.Check(ctx, s.client, s.cfg.Deployment, s.cfg.Namespace)
}

// connect opens the store and the Temporal client.
func (s *Server) connect(ctx context.Context) error {
	var err error
	objects, err := s.openObjects(ctx)
	if err != nil {
		return err
	}
	s.store, err = store.Open(ctx, s.cfg.DatabaseURL, store.Options{ResultInlineLimit: s.cfg.ResultInlineLimit, Objects: objects, Logger: s.logger,
		Retention: s.cfg.Retention, ModelLimits: s.cfg.ModelLimits.Map(), Build: s.cfg.Deployment.Build()})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	if s.knowledge, err = knowledge.New(ctx, s.store.Pool(), knowledge.Options{Logger: s.logger}); err != nil {
		return fmt.Errorf("open knowledge: %w", err)
	}
	// The tracing interceptor on the client serves the worker built from
	// it too: workflows and activities continue the starter's trace.
	interceptors, err := s.tracing.TemporalInterceptors()
	if err != nil {
		return err
	}
	compression, err := Compression(s.cfg.TemporalAddress, s.cfg.TemporalCompression)
	if err != nil {
		return err
	}
	// TLS, credentials and metadata as configured; the rest is ours.
	s.clientOpts = s.cfg.TemporalConnection
	s.clientOpts.HostPort, s.clientOpts.Namespace = s.cfg.TemporalAddress, s.cfg.Namespace
	s.clientOpts.Logger = SDKLogger(s.logger)
	s.clientOpts.Interceptors = interceptors
	s.clientOpts.ConnectionOptions.GrpcCompression = compression
	// Workers of this client report the SDK's metrics, and workflows
	// agentflow's, through it.
	s.clientOpts.MetricsHandler = s.metrics.Handler
	// Payloads over the store's threshold go to the object store, the
	// history holding a reference: for the client and every worker built
	// from it. Without a store, nothing changes.
	if objects != nil {
		s.payloads = payloadstore.New(objects)
		s.clientOpts.ExternalStorage = s.payloads.ExternalStorage()
	}
	s.client, err = client.DialContext(ctx, s.clientOpts)
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", s.cfg.TemporalAddress, err)
	}
	return nil
}

// memoryModel is the model that embeds long-term memories.
func (s *Server) memoryModel() string {
	return cmp.Or(s.cfg.MemoryEmbeddingModel, DefaultMemoryEmbeddingModel)
}

// secrets resolves the secrets catalogs name (env:NAME, file:/path) from
// the process's environment and mounted files, for a tenant only those
// the operator granted it (AGENTFLOW_SECRETS).
func (s *Server) secrets() secrets.Resolver {
	resolver := secrets.Schemes{secrets.SchemeEnv: secrets.NewEnv(os.LookupEnv), secrets.SchemeFile: secrets.Files{}}
	return secrets.Scoped(resolver, s.cfg.SecretGrants)
}

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
	s.mcp = tools.NewMCPSessions(tools.MCPSessionOptions{Logger: s.logger})
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
	var kn tools.Knowledge
	if s.knowledge != nil {
		kn = knowledge.Searcher{Store: s.knowledge, Embedder: embedder}
	}
	s.tools, err = tools.NewRegistry(tools.Deps{
		Knowledge: kn,
		Logger:    s.logger, Secrets: s.secrets(), SecretGrants: &s.cfg.SecretGrants,
		MCPCommands: s.cfg.MCPCommands, Egress: s.egress, MCPEnv: tools.MCPEnvFrom(os.Environ()), MCPSessions: s.mcp,
		Processes: s.store, Composites: s.store, ToolSearch: s.store,
		JQ:                  jqproc.New(jqproc.Options{Memory: s.cfg.JQMemory, Concurrency: s.cfg.JQPrograms}),
		OpenAPIMaxSpecBytes: s.cfg.OpenAPIMaxSpecBytes,
		Memories:            s.knowledge.Memories(embedder, s.memoryModel()),
	}, append(tools.Builtin(), s.cfg.ToolKinds...)...)
	if err != nil {
		return fmt.Errorf("tool registry: %w", err)
	}
	s.interrupts = pglive.NewInterrupts(s.store.Pool(), s.logger)
	acts, err := activities.New(activities.Deps{
		Store: s.store, Model: model, Tools: s.tools, Tenants: s.tenants, Logger: s.logger, Governor: gov,
		Temporal: s.client, Events: pglive.NewPublisher(s.store.Pool()), Interrupts: s.interrupts,
		Interrupt: func(ctx context.Context, streamID string) error {
			return pglive.Interrupt(ctx, s.store.Pool(), streamID)
		},
		StreamInterval: s.cfg.StreamInterval, DataInlineBytes: s.cfg.ToolDataInline,
		TraceContent: s.cfg.TraceContent, Vault: s.vault, TelegramAPI: s.cfg.TelegramAPI, MaxModelTimeout: s.cfg.MaxModelTimeout,
		MaxToolTimeout: s.cfg.MaxToolTimeout,
		Knowledge:      s.knowledge, Embedder: embedder,
		Memories: s.knowledge.Memories(embedder, s.memoryModel()),
		Programs: program.New(program.Options{Memory: s.cfg.ProgramMemory, Concurrency: s.cfg.Programs}),
	})
	if err != nil {
		return err
	}
	// Workflow pollers autoscale because that is the SDK's only mode with
	// separate pollers for the normal and the sticky queue. With a fixed
	// count every poller picks its queue, and a stale sticky-backlog hint
	// sends them all to the sticky queue: a new workflow's first task then
	// waits out a whole long poll (about a minute) on the normal one.
	wfPollers := orDefault(s.cfg.WorkflowPollers, defaultPollers)
	s.worker = worker.New(s.client, s.cfg.TaskQueue, worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: wfPollers,
			MinimumNumberOfPollers: minPollers,
			MaximumNumberOfPollers: wfPollers,
		}),
		MaxConcurrentActivityTaskPollers: orDefault(s.cfg.ActivityPollers, defaultPollers),
		MaxHeartbeatThrottleInterval:     heartbeatThrottle,
		Interceptors:                     []interceptor.WorkerInterceptor{&stickyReset{temporal: s.client, logger: s.logger}},
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
	})
	workflows.Register(s.worker)
	acts.Register(s.worker)
	return nil
}

// heartbeatThrottle is the longest the worker holds an activity's
// heartbeat before it sends it (the SDK's default holds it for 0.8 of the
// heartbeat timeout). Tool calls heartbeat every second under a 3 s
// timeout (workflows' toolHeartbeat): sent at once, each leaves a live
// worker 2 s to spare on a loaded machine rather than 0.6 s.
const heartbeatThrottle = time.Second

// newGateway serves the gRPC API, and the HTTP API unless it is off. With
// OIDC it first discovers the issuer and fetches its keys: a gateway that
// could not tell a good token from a bad one does not start.
func (s *Server) newGateway(ctx context.Context) error {
	if s.cfg.OIDC != nil {
		var err error
		if s.oidc, err = oidcauth.New(ctx, *s.cfg.OIDC); err != nil {
			return err
		}
		s.logger.Info("accepting OIDC tokens", zap.String("issuer", s.cfg.OIDC.Issuer), zap.String("audience", s.cfg.OIDC.Audience))
	}
	c, err := s.gatewayTemporal(ctx)
	if err != nil {
		return err
	}
	// Knowledge search embeds its queries with the configured providers,
	// through the same gates as every other model call.
	embedder, err := llm.New(s.cfg.Model)
	if err != nil {
		return fmt.Errorf("model providers: %w", err)
	}
	svc, err := gateway.New(gateway.Options{Client: c, Store: s.store, Events: s.follower, Tokens: s.cfg.Tokens, OIDC: s.oidc,
		TaskQueue: s.cfg.TaskQueue, Logger: s.logger, MaxStreamsPerTenant: s.cfg.MaxStreamsPerTenant, Tenants: s.tenants, Vault: s.vault,
		Secrets: s.secrets(), Payloads: payloadstore.Converter(s.payloads),
		Knowledge: gateway.KnowledgeOptions{Store: s.knowledge, Embedder: metered.Embedder{Gates: s.gates, Inner: embedder}},
		// Listing and erasing memories embed nothing.
		Memories: s.knowledge.Memories(nil, s.memoryModel())})
	if err != nil {
		return err
	}
	s.svc = svc
	// The gRPC API's calls by method and status code, in /metrics, whether
	// or not traces are exported.
	opts := s.tracing.GRPCServerOptions(s.metrics.MeterProvider)
	if s.cfg.GRPCTLS.Enabled() {
		creds, err := s.cfg.GRPCTLS.Credentials()
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	cat := gateway.NewCatalogService(s.store, s.tools, s.tenants, s.logger)
	s.grpc = gateway.NewGRPCServer(svc, cat, opts...)
	if s.apiLn == nil {
		return nil
	}
	// The HTTP API's calls are the gRPC API's, traced and counted the same.
	httpOpts := s.cfg.httpOptions()
	httpOpts.ServerOptions = s.tracing.GRPCServerOptions(s.metrics.MeterProvider)
	if s.api, err = gateway.NewHTTPAPI(svc, cat, httpOpts); err != nil {
		return err
	}
	// Headers are bounded here (in time and bytes), bodies by the API
	// (gateway.HTTPOptions): no ReadTimeout, which would cut the long
	// answers of streams too.
	s.apiHTTP = &http.Server{Handler: s.api, ReadHeaderTimeout: cmp.Or(s.cfg.HTTPHeaderTimeout, DefaultHTTPHeaderTimeout),
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ErrorLog: httpErrorLog(s.logger)}
	// Shutdown waits for neither event streams nor WebSockets: end them.
	s.apiHTTP.RegisterOnShutdown(s.api.EndStreams)
	return nil
}

// newHTTP serves /healthz, /health, /livez and /metrics, unless HTTPAddr is off.
func (s *Server) newHTTP() error {
	if s.httpLn == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	// The name seed 004's service answers its health checks on.
	mux.HandleFunc("GET /health", s.healthz)
	// Liveness: the process serves. Restarting it would not bring a
	// dependency back, so an outage fails /healthz, not this.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	if s.cfg.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// HTTPAddr is the address /healthz and /metrics are served on, "" when off.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// HTTPAPIAddr is the HTTP API's listening address, "" when off or
// without the gateway role.
func (s *Server) HTTPAPIAddr() string {
	if s.apiLn == nil {
		return ""
	}
	return s.apiLn.Addr().String()
}

// Client is the server's Temporal client.
func (s *Server) Client() client.Client { return s.client }

// GRPCAddr is the gateway's listening address, "" without the gateway role.
func (s *Server) GRPCAddr() string {
	if s.grpcLn == nil {
		return ""
	}
	return s.grpcLn.Addr().String()
}

// Metrics is the server's Prometheus registry (served at /metrics).
func (s *Server) Metrics() *prometheus.Registry { return s.metrics.Registry }

// Tracing is the server's tracing (off unless configured).
func (s *Server) Tracing() *telemetry.Tracing { return s.tracing }

// Follower follows turns' event streams (with this process's live path).
func (s *Server) Follower() *eventlog.Follower { return s.follower }

// Hub is the live path the follower listens on.
func (s *Server) Hub() *pglive.Hub { return s.hub }

// Gateway is the gateway's Service; nil without the gateway role.
func (s *Server) Gateway() *gateway.Service { return s.svc }

// Store is the server's store.
func (s *Server) Store() *store.Store { return s.store }

// Tenants is the worker's cache of its tenants' runtime settings.
func (s *Server) Tenants() *tenant.Cache { return s.tenants }

// Tools is the server's tool registry.
func (s *Server) Tools() *tools.Registry { return s.tools }

// Close releases what New acquired. Safe to call more than once.
func (s *Server) Close() {
	for _, ln := range []net.Listener{s.grpcLn, s.httpLn, s.apiLn} {
		if ln != nil {
			_ = ln.Close() // already closed when Run served on it
		}
	}
	if s.api != nil {
		s.api.Stop(0) // already stopped when Run served it
		s.api = nil
	}
	if s.mcp != nil {
		s.mcp.Close() // stops the stdio MCP servers it started
		s.mcp = nil
	}
	if s.gatewayClient != nil {
		s.gatewayClient.Close()
		s.gatewayClient = nil
	}
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	if s.store != nil {
		s.store.Close()
		s.store = nil
	}
	if s.scripted != nil {
		s.scripted.Close()
		s.scripted = nil
	}
	if s.tracing != nil {
		// Last, so that the spans of the parts closed above are flushed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.tracing.Shutdown(ctx); err != nil {
			s.logger.Warn("traces not flushed", zap.Error(err))
		}
		s.tracing = nil
	}
}

// healthz reports readiness per dependency: 200 when Postgres and
// Temporal answer, 503 (what a load balancer takes out of rotation)
// when either does not. The live path (Postgres LISTEN) only degrades
// streaming to log reads, so it is reported but does not fail the check;
// so is an OIDC issuer whose keys could not be fetched again, since the
// keys held keep verifying (an issuer unreachable at start fails New).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	rep := health{Status: "ok"}
	draining := s.draining.Load()
	if draining {
		// First, for a load balancer or Kubernetes to take the process out
		// of rotation while what is in flight finishes.
		rep.Status = "unavailable"
		rep.Checks = append(rep.Checks, check{Name: "shutdown", Status: "unavailable", Error: "shutting down: finishing what is in flight"})
	}
	rep.check(ctx, "postgres", func(ctx context.Context) error { return s.store.Pool().Ping(ctx) })
	rep.check(ctx, "temporal", func(ctx context.Context) error {
		_, err := s.client.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	})
	if s.cfg.Deployment.On() && s.cfg.Has(RoleWorker) {
		// A versioned worker gets no task, and its build cannot be made
		// current, until the server has registered it.
		rep.check(ctx, "deployment", func(ctx context.Context) error {
			return s.registered.Check(ctx, s.client, s.cfg.Deployment, s.cfg.TaskQueue)
		})
	}
	live := check{Name: "live_path", Status: "ok"}
	if !s.hub.Connected() {
		live.Status, live.Error = "degraded", "not listening for stream notifications; followers read the log"
	}
	rep.Checks = append(rep.Checks, live)
	if s.knowledge != nil {
		rep.KnowledgeIndex = s.knowledge.VectorIndex()
	}
	if s.oidc != nil {
		// Keys held keep verifying while the issuer is away.
		c := check{Name: "oidc", Status: "ok"}
		if err := s.oidc.Health(); err != nil {
			c.Status, c.Error = "degraded", err.Error()
		}
		rep.Checks = append(rep.Checks, c)
	}
	code := http.StatusOK
	if rep.Status != "ok" {
		code = http.StatusServiceUnavailable
		if !draining {
			s.logger.Warn("not ready", zap.Any("checks", rep.Checks))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}

// health is /healthz's answer.
type health struct {
	Status string  `json:"status"` // ok | unavailable
	Checks []check `json:"checks"`
	// KnowledgeIndex is how knowledge search finds vectors: "exact" (a
	// scan of every embedding) or "pgvector" (knowledge.Store.VectorIndex).
	KnowledgeIndex string `json:"knowledge_vector_index,omitempty"`
}

type check struct {
	Name      string  `json:"name"`
	Status    string  `json:"status"` // ok | unavailable | degraded
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

func (h *health) check(ctx context.Context, name string, probe func(context.Context) error) {
	start := time.Now()
	err := probe(ctx)
	c := check{Name: name, Status: "ok", LatencyMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		c.Status, c.Error, h.Status = "unavailable", err.Error(), "unavailable"
	}
	h.Checks = append(h.Checks, c)
}

func loadScript(name string) (*scripted.Script, error) {
	if name == "demo" {
		return scripted.Demo(), nil
	}
	s, err := scripted.LoadFile(name)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	return s, nil
}

// SDKLogger routes the Temporal SDK's logs through zap.
func SDKLogger(logger *zap.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(zapslog.NewHandler(logger.Core())))
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
