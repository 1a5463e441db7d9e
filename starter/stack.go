package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/cluster"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/flights"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/topology"
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
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exitError(exit.ExitCode())
	}
	return err
}

// productionFlags choose the production topology for up and demo.
type productionFlags struct {
	temporalDB   *string
	on           *bool
	cluster      *bool
	state        *string
	temporalPort *int
}

// startLocalFlags adds the local stack's flags (-catalog and the
// production topology's) to a command's own, declared on fs before the
// call, parses args and starts the stack.
func startLocalFlags(ctx context.Context, out io.Writer, fs *flag.FlagSet, args []string) (*local, error) {
	catalogDir := fs.String("catalog", "catalog", "catalog to apply at start")
	prod := addProductionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := prod.clusterAvailable(); err != nil {
		return nil, err
	}
	return startLocal(ctx, out, *catalogDir, prod)
}

func addProductionFlags(fs *flag.FlagSet) productionFlags {
	return productionFlags{
		temporalDB:   fs.String("temporal-db", "file", "the dev server's storage: file (kept in .data/temporal.db across restarts) or memory (faster; workflows are gone when it stops)"),
		on:           fs.Bool("production", false, "run the production topology: the real Temporal server on Postgres, two worker processes and a gateway process"),
		cluster:      fs.Bool("cluster", false, "run the production topology as a cluster of hosts on this machine, each a network namespace (needs root): PostgreSQL with a synchronous standby, the Temporal server's services, three workers and two gateways behind a balancer"),
		state:        fs.String("state", "", "with --production or --cluster: the state folder (Postgres, the server's config, logs); default .data/production, or .data/cluster"),
		temporalPort: fs.Int("temporal-port", devstack.DefaultTemporalPort, "with --production: the Temporal server's frontend port (0: a free one)"),
	}
}

// local is a running local stack with an in-process worker and gateway, or
// the production topology of separate processes.
type local struct {
	stack  *devstack.Stack
	srv    *server.Server
	top    *topology.Topology
	cfg    server.Config
	logger *zap.Logger
	// tokens are the gateway's bearer tokens by tenant, ownTokens whether
	// the starter made them up (else they come from AGENTFLOW_TOKENS).
	tokens    map[string]string
	ownTokens bool
	// flights is the sample API the data agent fetches from, when this
	// process serves it.
	flights *flights.Server
	// cluster is the production topology on hosts of its own (--cluster).
	cluster *cluster.Cluster
	done    chan error
	cancel  context.CancelFunc
	closed  bool
}

// devToken is the gateway's bearer token for tenant demo on a local stack.
const devToken = "dev-token"

// startLocal starts Postgres (unless DATABASE_URL is set) and the Temporal
// dev server (unless TEMPORAL_ADDRESS is set), a worker with the gateway,
// and applies the catalog through the gateway, as any client would.
// Without a model provider key the worker serves the scripted demo model.
func startLocal(ctx context.Context, out io.Writer, catalogDir string, prod productionFlags) (*local, error) {
	if db := *prod.temporalDB; db != "file" && db != "memory" {
		return nil, fmt.Errorf("--temporal-db %q: want file or memory", db)
	}
	logger, err := server.NewLogger("console", cmp.Or(os.Getenv("AGENTFLOW_LOG_LEVEL"), "warn"))
	if err != nil {
		return nil, err
	}
	cfg, err := server.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	// The starter's own server serves the offline demo model; the
	// production topology's workers are built with it (topology.Build).
	cfg.ScriptedModel = scripted.Serve
	model := demoModel(cfg)
	files, err := readCatalog(catalogDir)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	catalog, err := splitByTenant(files, model)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	l := &local{cfg: cfg, logger: logger, done: make(chan error, 1)}
	if err := l.chooseTokens(slices.Sorted(maps.Keys(catalog)), os.Getenv("AGENTFLOW_TOKENS")); err != nil {
		return nil, err
	}
	if l.ownTokens && (*prod.on || server.Loopback(l.cfg.HTTPAPIAddr)) {
		// The chat page starts signed in with the dev token: the
		// production topology's gateway listens on loopback too.
		l.cfg.ChatDevToken = devToken
	}
	if !l.cfg.Has(server.RoleGateway) {
		// The demo and the catalog go through the gateway.
		l.cfg.Roles = []string{server.RoleWorker, server.RoleGateway}
	}
	if model == "" && l.cfg.Script == "" {
		l.cfg.Script = "demo"
	}
	// The sample catalog's data agent calls the flights API on loopback,
	// which the operator's egress policy keeps closed unless opened.
	l.cfg.EgressAllow = append(l.cfg.EgressAllow, flightsAddr)
	if len(l.cfg.NexusBindings) == 0 && os.Getenv("TEMPORAL_ADDRESS") == "" {
		l.cfg.NexusBindings = []nexusdoor.Binding{agentsBinding}
	}

	switch {
	case *prod.cluster:
		err = l.startCluster(ctx, out, *prod.state)
	case *prod.on:
		err = l.startTopology(ctx, out, prod)
	default:
		err = l.startInProcess(ctx, out, *prod.temporalDB)
	}
	if err != nil {
		return nil, err
	}
	l.serveFlights(out)

	// One call per tenant: a token changes its own tenant only.
	changes := 0
	for _, tenant := range slices.Sorted(maps.Keys(catalog)) {
		resp, err := applyCatalog(ctx, l.api(tenant), &pb.UpsertCatalogRequest{Files: catalog[tenant]})
		if err != nil {
			l.close()
			return nil, err
		}
		changes += len(resp.GetChanges())
	}
	fmt.Fprintf(out, "Applied the catalog in %s/ (%d changes). Model: %s.\n", filepath.Clean(catalogDir), changes, l.modelName())
	return l, nil
}

// startInProcess starts the dev stack and runs the worker and the gateway
// in this process.
func (l *local) startInProcess(ctx context.Context, out io.Writer, temporalDB string) error {
	fmt.Fprintln(out, "Starting PostgreSQL and the Temporal dev server…")
	var err error
	l.stack, err = devstack.Start(ctx, devstack.Options{
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		TemporalAddress: os.Getenv("TEMPORAL_ADDRESS"),
		Namespace:       os.Getenv("TEMPORAL_NAMESPACE"),
		InMemory:        temporalDB == "memory",
		// An object store named by AGENTFLOW_S3_* is used instead.
		SkipObjectStore: l.cfg.ObjectStore.Enabled(),
		Namespaces:      []string{teamsNamespace},
		NexusEndpoints:  l.nexusEndpoints(cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), devstack.DefaultNamespace)),
		Logger:          l.logger,
		Progress:        out,
	})
	if err != nil {
		return err
	}
	if !l.cfg.ObjectStore.Enabled() {
		l.cfg.ObjectStore = l.stack.ObjectStore
	}
	l.cfg.DatabaseURL = l.stack.DatabaseURL
	l.cfg.TemporalAddress = l.stack.TemporalAddress
	l.cfg.Namespace = l.stack.Namespace
	if l.stack.TemporalHTTPAddress != "" {
		l.cfg.TemporalHTTPAddr = l.stack.TemporalHTTPAddress
	}
	if l.cfg.WebUIURL == "" {
		// Timelines link each run to the dev server's UI (none when
		// headless, or a server the stack did not start).
		l.cfg.WebUIURL = l.stack.UIURL
	}
	l.cfg.PlatformAddrs = append(l.cfg.PlatformAddrs, l.stack.PlatformAddrs()...)
	l.srv, err = server.New(ctx, l.cfg, l.logger)
	if err != nil {
		_ = l.stack.Stop()
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go func() { l.done <- l.srv.Run(runCtx) }()
	return nil
}

// startTopology starts the production topology: the real Temporal server
// on Postgres, two workers and a gateway, each a process of its own.
func (l *local) startTopology(ctx context.Context, out io.Writer, prod productionFlags) error {
	if os.Getenv("TEMPORAL_ADDRESS") != "" {
		return errors.New("--production starts its own Temporal server: unset TEMPORAL_ADDRESS")
	}
	dir, err := filepath.Abs(cmp.Or(*prod.state, filepath.Join(".data", "production")))
	if err != nil {
		return err
	}
	port := *prod.temporalPort
	port = cmp.Or(port, -1) // devstack's "a free port"
	gatewayAddr := l.cfg.GRPCAddr
	if strings.HasSuffix(gatewayAddr, ":0") {
		gatewayAddr = "" // a free one, known once started
	}
	fmt.Fprintln(out, "Starting PostgreSQL, the Temporal server, two workers and a gateway…")
	l.top, err = topology.Start(ctx, topology.Options{
		Dir: dir, Env: l.processEnv(), GatewayAddr: gatewayAddr, TemporalPort: port,
		DatabaseURL: os.Getenv("DATABASE_URL"), Logger: l.logger, Progress: out,
		Namespaces: []string{teamsNamespace}, NexusEndpoints: l.nexusEndpoints(devstack.DefaultNamespace),
	})
	if err != nil {
		return err
	}
	l.stack = l.top.Stack
	return nil
}

// processEnv is what the production topology's processes get beside their
// own settings: tokens, the scripted model, egress and Nexus bindings.
func (l *local) processEnv() []string {
	env := []string{}
	if l.ownTokens {
		env = append(env, "AGENTFLOW_TOKENS="+l.tokensEnv())
	}
	if l.cfg.ChatDevToken != "" {
		env = append(env, server.EnvChatDevToken+"="+l.cfg.ChatDevToken)
	}
	if l.cfg.Script != "" {
		env = append(env, "AGENTFLOW_SCRIPT="+l.cfg.Script)
	}
	env = append(env, egress.EnvAllow+"="+strings.Join(l.cfg.EgressAllow, ","))
	if l.servesAgents() {
		b := agentsBinding
		env = append(env, nexusdoor.EnvBindings+"="+b.TaskQueue+"="+b.TenantID+":"+strings.Join(b.Roles, "+")+":"+b.Name)
	}
	return env
}

// tokensEnv is AGENTFLOW_TOKENS for the development tokens.
func (l *local) tokensEnv() string {
	var roles, entries []string
	for _, r := range gateway.AllRoles() {
		roles = append(roles, string(r))
	}
	for _, t := range slices.Sorted(maps.Keys(l.tokens)) {
		entries = append(entries, fmt.Sprintf("%s=%s:%s:dev", l.tokens[t], t, strings.Join(roles, "+")))
	}
	return strings.Join(entries, ",")
}

// grpcAddr is the gateway's address.
func (l *local) grpcAddr() string {
	if l.cluster != nil {
		return l.cluster.ClientAddr
	}
	if l.top != nil {
		return l.top.Gateways[0].GRPCAddr
	}
	return l.srv.GRPCAddr()
}

// chatURL is the link of the chat page the gateway serves on its HTTP
// API; a listener on every interface is linked on the loopback one.
func (l *local) chatURL() string {
	var addr string
	switch {
	case l.cluster != nil:
		addr = l.cluster.HTTPBalancer.Addr
	case l.top != nil:
		addr = l.top.Gateways[0].HTTPAPIAddr
	default:
		addr = l.srv.HTTPAPIAddr()
	}
	if addr == "" {
		return "off (AGENTFLOW_HTTP_API_ADDR=off)"
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + addr + chatpage.Path
}

// turnsURL is the link of the page of recent turns, beside the chat
// page's.
func (l *local) turnsURL() string {
	chat := l.chatURL()
	if !strings.HasSuffix(chat, chatpage.Path) {
		return chat
	}
	return strings.TrimSuffix(chat, chatpage.Path) + chatpage.TurnsPath
}

// chatLink is the chat page's link, with how it signs in.
func (l *local) chatLink() string {
	if l.cfg.ChatDevToken != "" {
		return l.chatURL() + " (signed in with " + l.cfg.ChatDevToken + ")"
	}
	return l.chatURL() + " (the same tokens)"
}

// flightsAddr is where the sample catalog's data agent finds the flights
// API (its egress allowlist names it).
const flightsAddr = "127.0.0.1:8089"

// serveFlights serves the sample flights API on AGENTFLOW_FLIGHTS_ADDR
// (default flightsAddr; "off" does not). A port already taken is most
// likely another local stack serving it: the data agent uses that one.
func (l *local) serveFlights(out io.Writer) {
	addr := cmp.Or(os.Getenv("AGENTFLOW_FLIGHTS_ADDR"), flightsAddr)
	if addr == "off" || l.cluster != nil { // the hosts do not reach it (startCluster)
		return
	}
	srv, err := flights.Start(addr)
	if err != nil {
		fmt.Fprintf(out, "The sample flights API is not served here (%v); the data agent calls whatever answers on %s.\n", err, addr)
		return
	}
	l.flights = srv
}

// chooseTokens gives every tenant of the catalog a bearer token the
// starter can apply its catalog with. Without AGENTFLOW_TOKENS the local
// stack makes up its development tokens, with every role, never a default
// elsewhere: dev-token for tenant demo and dev-token-<tenant> for the
// others. With it (configured is its value), every tenant of the catalog
// needs a token with the admin role written in plain there.
func (l *local) chooseTokens(tenants []string, configured string) error {
	l.tokens = map[string]string{}
	if len(l.cfg.Tokens) == 0 {
		l.ownTokens = true
		for _, t := range append([]string{"demo"}, tenants...) {
			secret := devToken
			if t != "demo" {
				secret += "-" + t
			}
			if t == "" || l.tokens[t] != "" {
				continue
			}
			tok, err := gateway.NewToken(secret, t, "dev", gateway.AllRoles()...)
			if err != nil {
				return err
			}
			l.cfg.Tokens = append(l.cfg.Tokens, tok)
			l.tokens[t] = secret
		}
		return nil
	}
	for _, entry := range strings.Split(configured, ",") {
		secret, spec, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || strings.HasPrefix(secret, "sha256:") {
			continue
		}
		if tok, err := gateway.ParseToken(secret, spec); err == nil && tok.Has(gateway.RoleAdmin) && l.tokens[tok.Tenant] == "" {
			l.tokens[tok.Tenant] = secret
		}
	}
	for _, t := range tenants {
		if t != "" && l.tokens[t] == "" {
			return fmt.Errorf("the catalog names tenant %q, and AGENTFLOW_TOKENS has no plain token with the admin role for it: add one, or unset AGENTFLOW_TOKENS for the local stack's development tokens", t)
		}
	}
	return nil
}

// api is how the starter reaches the local gateway as tenant; a catalog
// in which no document names a tenant is sent with any token (the gateway
// says what is wrong with it).
func (l *local) api(tenant string) apiFlags {
	addr, token := l.grpcAddr(), l.tokens[tenant]
	if token == "" {
		token = l.tokens[slices.Sorted(maps.Keys(l.tokens))[0]]
	}
	return apiFlags{addr: &addr, token: &token}
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
	if l.cluster != nil {
		l.printClusterHowTo(out)
		return
	}
	fmt.Fprintf(out, `
agentflow is running.
  Temporal:  %s (namespace %s)
  Web UI:    %s
  Postgres:  %s
  Objects:   %s
  Model:     %s
  gRPC API:  %s (%s)
  Chat page: %s
  Turns:     %s (each turn's page; go run ./starter inspect turn/demo/JOB prints one)
  Flights:   %s (the sample API of the data agent)
  Teams:     %s

Try:
  export TEMPORAL_ADDRESS=%s AGENTFLOW_GRPC_ADDR=%s
  go run ./starter run --tenant demo "What is 12.5 * 4?"
  go run ./starter chat "What is 12.5 * 4?"
  go run ./starter chat --agent data --session trip "fetch flights from NYC to LAX, sort by price, show top 3"
  go run ./starter chat --agent data --session trip 'now filter those under $230'
  go run ./starter route --dry-run --page ops-console "restart the api"
  go run ./starter catalog apply -f catalog/ --dry-run
  .bin/temporal workflow list --address %s
`, l.stack.TemporalAddress, l.stack.Namespace, cmp.Or(l.stack.UIURL, "(none)"), l.stack.DatabaseURL, l.objectsNote(), l.modelName(),
		l.grpcAddr(), l.tokenNote(), l.chatLink(), l.turnsURL(), l.flightsURL(), l.teamsNote(),
		l.stack.TemporalAddress, l.grpcAddr(), l.stack.TemporalAddress)
}

// objectsNote says where blobs over the object store's threshold go.
func (l *local) objectsNote() string {
	c := l.cfg.ObjectStore
	if l.top != nil {
		c = l.stack.ObjectStore
	}
	if !c.Enabled() {
		return "none (every blob in Postgres)"
	}
	return c.String()
}

func (l *local) flightsURL() string {
	if l.flights != nil {
		return l.flights.URL()
	}
	return "not served by this process"
}

// tokenNote says which bearer tokens the gateway takes.
func (l *local) tokenNote() string {
	if !l.ownTokens {
		return "the tokens of AGENTFLOW_TOKENS"
	}
	var notes []string
	for _, t := range slices.Sorted(maps.Keys(l.tokens)) {
		notes = append(notes, fmt.Sprintf("token %s for tenant %s", l.tokens[t], t))
	}
	return strings.Join(notes, ", ")
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
	if l.closed {
		return
	}
	l.closed = true
	if l.cancel != nil {
		l.cancel()
		if err := <-l.done; err != nil {
			l.logger.Warn("worker stopped with an error", zap.Error(err))
		}
		l.cancel = nil
	}
	if l.flights != nil {
		_ = l.flights.Close()
	}
	if l.cluster != nil {
		l.stopCluster()
		return
	}
	if l.top != nil {
		if err := l.top.Stop(); err != nil {
			l.logger.Warn("stop production topology", zap.Error(err))
		}
		return
	}
	l.srv.Close()
	if err := l.stack.Stop(); err != nil {
		l.logger.Warn("stop local stack", zap.Error(err))
	}
}
