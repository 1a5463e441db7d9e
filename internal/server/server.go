package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/asked"
	"github.com/agentflow/agentflow/internal/deploy"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/payloadstore"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
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
	mcp        *mcptool.Sessions
	worker     worker.Worker
	// nexus serves agentflow.v1.Agents on each bound endpoint's queue.
	nexus     []worker.Worker
	scripted  io.Closer
	scriptURL string // the scripted model's, when it serves one
	http      *http.Server
	httpLn    net.Listener
	hub       *pglive.Hub
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
		if !s.cfg.Model.HasCredentials() && s.cfg.ScriptedModel != nil {
			s.cfg.Script = "demo"
		}
	}
	if s.cfg.Script == "" {
		return nil
	}
	var err error
	s.scripted, s.scriptURL, err = s.cfg.ScriptedModel(s.cfg.Script)
	if err != nil {
		return err
	}
	s.cfg.Model.OpenAIBaseURL = s.scriptURL
	s.cfg.Model.OpenAIAPIKey = "scripted"
	s.logger.Info("serving the scripted model", zap.String("url", s.scriptURL), zap.String("script", s.cfg.Script))
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
	// The turn tells the team's code who asked for a call it schedules
	// on the team's worker (activity tools).
	s.clientOpts.ContextPropagators = append(s.clientOpts.ContextPropagators, asked.Propagator())
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

// HTTPAddr is the address /healthz and /metrics are served on, "" when off.
func (s *Server) HTTPAddr() string { return addrOf(s.httpLn) }

// HTTPAPIAddr is the HTTP API's listening address, "" when off or
// without the gateway role.
func (s *Server) HTTPAPIAddr() string { return addrOf(s.apiLn) }

// Client is the server's Temporal client.
func (s *Server) Client() client.Client { return s.client }

// GRPCAddr is the gateway's listening address, "" without the gateway role.
func (s *Server) GRPCAddr() string { return addrOf(s.grpcLn) }

// addrOf is ln's address, "" without ln.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
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
		_ = s.scripted.Close()
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

// SDKLogger routes the Temporal SDK's logs through zap.
func SDKLogger(logger *zap.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(zapslog.NewHandler(logger.Core())))
}
