// Package testserver runs agentflow's whole process in-process for
// end-to-end tests: the assembly of internal/server (worker, and with
// tokens the gateway's gRPC API, and its HTTP API when asked) on a private database and task queue of the
// test's own, against the Temporal dev server shared by the test binary
// (both from devtest), with a scripted model and catalog documents
// applied before it starts.
//
// It is an ordinary package so that the tests of several packages share
// one harness, but only tests import it. The package under test must run
// its tests through devtest.Main:
//
//	func TestMain(m *testing.M) { devtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		ts := testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{catalog}})
//		run, err := ts.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(ts.TaskQueue, req), contract.AgentTurn, req)
//		...
//	}
//
// Everything Start acquires is released by the test's cleanup, which also
// fails the test when the server did not stop cleanly.
package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
)

// cliTimeout bounds one run of the temporal CLI.
const cliTimeout = time.Minute

// Options of a test server.
type Options struct {
	// Script is the scripted model's script (YAML). Required unless
	// SharedModel is set.
	Script string
	// SharedModel is a scripted model already serving (another test
	// server's Model), for a second worker process that calls the same
	// provider. Default: none, a model of the server's own from Script.
	SharedModel *scripted.Server
	// ModelLimits are the providers' limits the worker's model calls are
	// held to (AGENTFLOW_MODEL_LIMITS). Default: none.
	ModelLimits governor.Limits
	// Model configures the scripted model's server, for instance to time
	// its chunks with OnChunk. Default: scripted's defaults.
	Model scripted.Options
	// Catalogs are catalog documents (YAML), applied one after the other
	// before the server starts. Default: none.
	Catalogs []string
	// DatabaseURL is the server's database. Default: a new, empty one on
	// the test binary's Postgres (devtest.Database), dropped after the test.
	DatabaseURL string
	// Tokens maps gateway bearer tokens to what AGENTFLOW_TOKENS says of
	// them: <tenant>[:<roles>[:<name>]] (gateway.ParseToken). With any, the server
	// also plays the gateway role on a free port and Server.Conn is a
	// connection to it. Default: none, the worker only.
	Tokens map[string]string
	// OIDC makes the gateway accept an OIDC issuer's tokens
	// (server.Config.OIDC), and with it the server plays the gateway role
	// as with Tokens. Default: none.
	OIDC *oidcauth.Config
	// TaskQueue is the worker's task queue. Default: a new name per
	// server, so that tests on the shared dev server keep apart.
	TaskQueue string
	// StreamInterval is the time between token batches. Default: the
	// server's.
	StreamInterval time.Duration
	// HTTP serves /healthz, /livez and /metrics on a free port
	// (Server.HTTPAddr). Default: off.
	HTTP bool
	// HTTPAPI serves the gateway's HTTP API on a free port
	// (Server.HTTPAPIAddr); it needs Tokens. Default: off.
	HTTPAPI bool
	// CORSOrigins are the origins the HTTP API lets pages call it from
	// (AGENTFLOW_CORS_ORIGINS). Default: none.
	CORSOrigins []string
	// ChatDevToken, one of Tokens, is the token the chat page signs in
	// with (AGENTFLOW_CHAT_DEV_TOKEN), as on a local stack. Default: none.
	ChatDevToken string
	// MaxStreamsPerTenant bounds each tenant's open streams on the
	// gateway (AGENTFLOW_MAX_STREAMS_PER_TENANT). Default: the server's.
	MaxStreamsPerTenant int
	// HTTPBodyTimeout is how long a request's body may take to arrive on
	// the HTTP API (AGENTFLOW_HTTP_BODY_TIMEOUT). Default: the server's.
	HTTPBodyTimeout time.Duration
	// Logger is the server's logger. Default: the test's log, warnings
	// and errors only.
	Logger *zap.Logger
	// MCPCommands are the commands stdio MCP servers may run
	// (AGENTFLOW_MCP_COMMANDS). Default: none.
	MCPCommands []string
	// EgressAllow is what the operator's egress policy opens
	// (AGENTFLOW_EGRESS_ALLOW). Default (nil): 127.0.0.0/8 and ::1, where
	// tests' own servers listen. An empty, non-nil list opens nothing: the
	// default policy of a process without the variable.
	EgressAllow []string
	// SecretGrants are the secrets each tenant may name
	// (AGENTFLOW_SECRETS). Default (nil): every tenant every secret but
	// the platform's own variables (secrets.GrantAll).
	SecretGrants *secrets.Grants
	// VaultKey is the operator's vault key (server.Config.VaultKey);
	// default none.
	VaultKey []byte
	// PlatformAddrs are more of the platform's own addresses, closed to
	// tools whatever EgressAllow opens (AGENTFLOW_PLATFORM_ADDRS), beside
	// what the server knows from its configuration and every listener of
	// the shared dev servers (devtest.PlatformAddrs), which are always
	// closed. Default: none.
	PlatformAddrs []string
	// TracerProvider records the server's spans (gRPC, workflows,
	// activities, model and tool calls), for instance one with
	// tracetest's in-memory exporter. Default: none, tracing off (the
	// test binary's OTEL_* variables are not read).
	TracerProvider trace.TracerProvider
	// TraceContent records prompts, replies and tool arguments and output
	// on the spans (AGENTFLOW_TRACE_CONTENT). Default: off.
	TraceContent bool
	// TelegramAPI is the Bot API's base URL (AGENTFLOW_TELEGRAM_API), for
	// instance a local server that speaks its shape. Default: Telegram's.
	TelegramAPI string
	// ToolKinds are tool kinds the worker offers beside the built-in
	// ones, for tests of what a tool can do. Default: none.
	ToolKinds []tools.Kind
	// TemporalAllow is the operator's allow list of activity tools'
	// task queues and types (AGENTFLOW_TEMPORAL_ALLOW, internal/reach).
	// Default: none.
	TemporalAllow *reach.Policy
	// NexusBindings are the endpoints' queues the worker serves
	// agentflow.v1.Agents on, each as its tenant.
	NexusBindings []nexusdoor.Binding
	// Models are model providers of the test's own beside the scripted
	// model (llm.Config.Providers). Default: none.
	Models map[string]llms.Model
	// Hooks run around every model and tool call after tracing
	// (server.Config.Hooks). Default: none.
	Hooks []hooks.Handler
	// Scorers are the worker's own evaluation checks
	// (server.Config.Scorers). Default: none.
	Scorers []evals.Scorer
	// TemporalAddress and Namespace are a Temporal server of the test's
	// own, for instance a dev server with its Web UI, and
	// TemporalHTTPAddress its HTTP API, closed to tools. Default: the dev
	// server shared by the test binary (devtest.Temporal) and its HTTP
	// API.
	TemporalAddress, Namespace, TemporalHTTPAddress string
	// ObjectStore keeps the server's blobs larger than
	// objstore.DefaultMinBlobBytes in a bucket of the test's own on the
	// stack's object store (devtest.ObjectStore, AGENTFLOW_S3_*).
	// Default: off, every blob in PostgreSQL.
	ObjectStore bool
	// ObjectStoreConfig, when it names a bucket, is the object store
	// instead (for one reached through a devtest.Proxy). Default: none.
	ObjectStoreConfig objstore.Config
	// TemporalConnection is how the server reaches TemporalAddress beyond
	// it: TLS, credentials (server.TemporalConnection). Default:
	// plaintext.
	TemporalConnection client.Options
	// Retention is the operator's TTLs (server.Config.Retention).
	Retention agent.Retention
	// WebUIURL and TraceURL are where a turn's timeline links its runs
	// and its trace (server.Config.WebUIURL, TraceURL). Default: none.
	WebUIURL, TraceURL string
}

// Server is a running test server. The embedded server.Server gives its
// Temporal client, store, tools, follower, metrics and gRPC address.
type Server struct {
	*server.Server
	// Model is the scripted model the server's openai provider calls.
	Model *scripted.Server
	// TaskQueue is the worker's task queue.
	TaskQueue string
	// Address and Namespace are the Temporal dev server's.
	Address, Namespace string
	// Conn is a client connection to the gateway; nil without Tokens or
	// OIDC.
	Conn *grpc.ClientConn
}

// Start runs a server for the test until its cleanup. It fails the test
// when anything does not start; call it on the test's goroutine.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Script == "" && opts.SharedModel == nil {
		t.Fatal("testserver: Options.Script is required")
	}
	st := stackOf(t, opts)
	s := &Server{TaskQueue: opts.TaskQueue, Address: st.address, Namespace: st.namespace}
	if s.TaskQueue == "" {
		s.TaskQueue = "agentflow-test-" + RandomID()
	}
	s.Model = startModel(t, opts)

	logger := opts.Logger
	if logger == nil {
		logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	cfg := s.config(t, opts, st)
	gatewayRole := opts.gatewayRole()
	if opts.HTTPAPI && !gatewayRole {
		t.Fatal("testserver: Options.HTTPAPI needs Tokens or OIDC (the gateway role)")
	}
	if gatewayRole {
		gatewayConfig(t, opts, &cfg)
	}
	s.run(t, cfg, logger, opts.Catalogs)
	if opts.TaskQueue == "" {
		s.dropRetentionSchedule(t)
	}

	if gatewayRole {
		s.dialGateway(t)
	}
	return s
}

// dropRetentionSchedule deletes, when the test ends, the schedule the
// worker made for its own task queue: a queue named for one test is
// never served again, and the schedules of a whole suite would otherwise
// stay on the shared Temporal server, each a workflow on its system
// worker, slowing every other test's schedules.
func (s *Server) dropRetentionSchedule(t testing.TB) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Client().ScheduleClient().GetHandle(ctx, contract.RetentionScheduleID(s.TaskQueue)).Delete(ctx)
	})
}

// gatewayRole reports whether the server plays the gateway role: with
// Tokens or OIDC.
func (o Options) gatewayRole() bool { return len(o.Tokens) > 0 || o.OIDC != nil }

// stack is where a test server's dependencies are: the test's own, or
// the servers the test binary shares.
type stack struct {
	databaseURL, address, namespace, httpAPI string
	// platform are the platform's addresses closed to tools.
	platform []string
}

// stackOf is the stack opts name, the shared servers' for what they do
// not.
func stackOf(t testing.TB, opts Options) stack {
	t.Helper()
	st := stack{databaseURL: opts.DatabaseURL, address: opts.TemporalAddress, namespace: opts.Namespace, httpAPI: opts.TemporalHTTPAddress}
	if st.databaseURL == "" {
		st.databaseURL = devtest.Database(t)
	}
	if st.address == "" {
		st.address, st.namespace = devtest.Temporal(t)
		st.httpAPI = devtest.TemporalHTTPAddress(t)
	}
	// Every listener of the shared servers is closed to tools, as the
	// starter closes its stack's: the dev server's metrics and internal
	// ports are on loopback, which allow opens.
	st.platform = append(slices.Clone(opts.PlatformAddrs), devtest.PlatformAddrs(t)...)
	return st
}

// startModel is the scripted model the server calls: opts.SharedModel,
// or one of the server's own from opts.Script, closed at the test's end.
func startModel(t testing.TB, opts Options) *scripted.Server {
	t.Helper()
	if opts.SharedModel != nil {
		return opts.SharedModel
	}
	script, err := scripted.Parse([]byte(opts.Script))
	if err != nil {
		t.Fatalf("testserver: model script: %v", err)
	}
	model, err := scripted.Start("127.0.0.1:0", script, opts.Model)
	if err != nil {
		t.Fatalf("testserver: start scripted model: %v", err)
	}
	t.Cleanup(func() { _ = model.Close() })
	return model
}

// config is the server's configuration: on st, with s's model and task
// queue, and what opts set.
func (s *Server) config(t testing.TB, opts Options, st stack) server.Config {
	t.Helper()
	allow := opts.EgressAllow
	if allow == nil {
		allow = []string{"127.0.0.0/8", "::1"}
	}
	grants := secrets.GrantAll()
	if opts.SecretGrants != nil {
		grants = *opts.SecretGrants
	}
	cfg := server.Config{
		TemporalAddress:    st.address,
		TemporalHTTPAddr:   st.httpAPI,
		Namespace:          st.namespace,
		TemporalConnection: opts.TemporalConnection,
		TaskQueue:          s.TaskQueue,
		DatabaseURL:        st.databaseURL,
		HTTPAddr:           "off",
		// The scripted model speaks OpenAI's API and Anthropic's Messages
		// API: agents of either provider reach it.
		Model: llm.Config{OpenAIBaseURL: s.Model.URL(), OpenAIAPIKey: "test-key",
			AnthropicBaseURL: s.Model.RootURL(), AnthropicAPIKey: "test-key", Providers: opts.Models},
		StreamInterval: opts.StreamInterval,
		// Tests run with the race detector on machines running many
		// test processes: a workflow task may take longer than the
		// SDK's second there without any deadlock.
		DeadlockDetectionTimeout: 10 * time.Second,
		MCPCommands:              opts.MCPCommands,
		EgressAllow:              allow,
		SecretGrants:             grants,
		VaultKey:                 opts.VaultKey,
		PlatformAddrs:            st.platform,
		TracerProvider:           opts.TracerProvider,
		TraceContent:             opts.TraceContent,
		TelegramAPI:              opts.TelegramAPI,
		ToolKinds:                opts.ToolKinds,
		TemporalAllow:            opts.TemporalAllow,
		NexusBindings:            opts.NexusBindings,
		Hooks:                    opts.Hooks,
		Scorers:                  opts.Scorers,
		MaxStreamsPerTenant:      opts.MaxStreamsPerTenant,
		HTTPBodyTimeout:          opts.HTTPBodyTimeout,
		ModelLimits:              opts.ModelLimits,
		Retention:                opts.Retention,
		WebUIURL:                 opts.WebUIURL,
		TraceURL:                 opts.TraceURL,
		// A test's end does not wait for the activities its turns left
		// running.
		StopTimeout: time.Second,
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if opts.HTTP {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	if opts.ObjectStore {
		cfg.ObjectStore = devtest.ObjectStore(t)
	}
	if opts.ObjectStoreConfig.Enabled() {
		cfg.ObjectStore = opts.ObjectStoreConfig
	}
	return cfg
}

// gatewayConfig gives cfg the gateway role on free ports, with opts'
// OIDC issuer and tokens, and the HTTP API when opts ask for it.
func gatewayConfig(t testing.TB, opts Options, cfg *server.Config) {
	t.Helper()
	cfg.OIDC = opts.OIDC
	cfg.Roles = []string{server.RoleWorker, server.RoleGateway}
	cfg.GRPCAddr = "127.0.0.1:0"
	if opts.HTTPAPI {
		cfg.HTTPAPIAddr, cfg.CORSOrigins, cfg.ChatDevToken = "127.0.0.1:0", opts.CORSOrigins, opts.ChatDevToken
	}
	for secret, spec := range opts.Tokens {
		tok, err := gateway.ParseToken(secret, spec)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		cfg.Tokens = append(cfg.Tokens, tok)
	}
}

// run builds the server, applies the catalogs, and runs it until the
// test's cleanup, which fails the test when it did not stop cleanly.
func (s *Server) run(t testing.TB, cfg server.Config, logger *zap.Logger, catalogs []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var err error
	s.Server, err = server.New(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(s.Server.Close)
	if err := ApplyCatalogs(ctx, s.Store(), s.Tools(), catalogs...); err != nil {
		t.Fatalf("testserver: %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("testserver: run: %v", err)
		}
	})
}

// dialGateway connects s.Conn to the gateway's gRPC API.
func (s *Server) dialGateway(t testing.TB) {
	t.Helper()
	var err error
	s.Conn, err = grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("testserver: dial gateway: %v", err)
	}
	// Registered last, so closed before the gateway stops: its
	// graceful stop waits for open connections.
	t.Cleanup(func() { _ = s.Conn.Close() })
}

// ApplyCatalog parses catalog documents with the server's tool kinds and
// applies them one after the other, failing the test on an error. Call it
// on the test's goroutine.
func (s *Server) ApplyCatalog(t testing.TB, docs ...string) {
	t.Helper()
	if err := ApplyCatalogs(context.Background(), s.Store(), s.Tools(), docs...); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	// As the gateway does after an apply: the next turn sees it at once.
	s.Tenants().Invalidate("")
}

// ApplyCatalogs parses catalog documents and applies them to st one after
// the other, for tests that run the worker outside Start too, within the
// operator's egress policy of kinds (tools.Deps.Egress). It is the
// tests' one place that turns a parsed catalog into what the store takes.
func ApplyCatalogs(ctx context.Context, st *store.Store, kinds catalog.Kinds, docs ...string) error {
	for i, doc := range docs {
		name := fmt.Sprintf("catalog%d.yaml", i+1)
		cat, err := catalog.Parse(kinds, name, []byte(doc))
		if err != nil {
			return fmt.Errorf("parse %s: %w", name, err)
		}
		if err := catalog.Resolve(ctx, kinds, &cat, tenant.ResolveEnvOf(ctx, st, kinds.Deps().Egress, false)); err != nil {
			return fmt.Errorf("resolve %s: %w", name, err)
		}
		if _, err := st.ApplyCatalog(ctx, cat, false); err != nil {
			return fmt.Errorf("apply %s: %w", name, err)
		}
	}
	return nil
}

// UserMetadata returns what the Web UI shows as a workflow's summary and
// details (its StaticSummary and StaticDetails; empty when not set), of
// its latest run. It fails the test when the workflow cannot be read.
func (s *Server) UserMetadata(t testing.TB, workflowID string) (summary, details string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	desc, err := s.Client().DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("testserver: describe %s: %v", workflowID, err)
	}
	md := desc.GetExecutionConfig().GetUserMetadata()
	for _, f := range []struct {
		p   *commonpb.Payload
		out *string
	}{{md.GetSummary(), &summary}, {md.GetDetails(), &details}} {
		if f.p == nil {
			continue
		}
		if err := converter.GetDefaultDataConverter().FromPayload(f.p, f.out); err != nil {
			t.Fatalf("testserver: user metadata of %s: %v", workflowID, err)
		}
	}
	return summary, details
}

// Temporal runs the real temporal CLI with args against the server's
// Temporal address and namespace, and returns its combined output.
func (s *Server) Temporal(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cli, err := TemporalCLI(ctx)
	if err != nil {
		return "", err
	}
	args = append(args, "--address", s.Address, "--namespace", s.Namespace)
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	return string(out), err
}

// TemporalCLI is the path of the module's temporal CLI, built on first use
// (devstack.TemporalCLI).
func TemporalCLI(ctx context.Context) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return devstack.TemporalCLI(ctx, root)
}

// moduleRoot is the nearest folder at or above the working directory (a
// test's package folder) that holds a go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("find module root: no go.mod at or above %s", wd)
		}
	}
}

// RandomID is a new random id of 12 hex digits, for the names a test
// gives what it creates on the servers the test binary shares (task
// queues, job, session and workflow ids), so that tests keep apart.
func RandomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
