package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
	"github.com/agentflow/agentflow/internal/topology"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const (
	tenant = "chaos"
	token  = "chaos-token"
)

// env is the running topology with its model and clients.
type env struct {
	top   *topology.Topology
	model atomic.Pointer[scripted.Server]
	http  *http.Server
	// api is the HTTP API the pipeline tool fetches from; mcp the MCP
	// server whose slow tool the agent calls, mcpCalls its calls as they
	// start.
	api    *mcptest.Crashable
	ledger *ledger // the API's POST /ledger (programkill.go)
	// journal is the API's POST /journal (writes.go).
	journal *journal
	// proxies stand between each worker (by index) and Temporal.
	proxies []*cutProxy
	// stockCalls counts the API's GET /stock requests (replay.go).
	stockCalls atomic.Int64
	mcp        *mcptest.HTTPServer
	mcpCalls   chan string
	conns      []*grpc.ClientConn
	db         *pgxpool.Pool
	log        *zap.Logger
	// short says the suite runs short; rng makes the trials' random
	// choices, from the suite's seed; notes are what the current run
	// reports (note).
	short bool
	rng   *rand.Rand
	notes []string
	// pauses are the current run's (Result.Pauses).
	pauses []time.Duration
	// embedDelay, when positive, slows every embeddings request by that
	// many nanoseconds (ingest.go).
	embedDelay atomic.Int64
	// nexusReady says the callers' namespace and the Nexus endpoint are
	// made (nexus.go).
	nexusReady bool
}

// note adds a line to the current run's report.
func (e *env) note(s string) { e.notes = append(e.notes, s) }

// paused adds the pause of a run whose worker a strike killed.
func (e *env) paused(run *turnRun) {
	if run.killedAt.Load() != 0 {
		e.pauses = append(e.pauses, run.pause)
	}
}

// start brings the suite up in the order each part needs the one before:
// the model, the tenant's API and MCP server, the topology that reaches
// them, and the clients with the tenant's catalog applied. A part that
// fails takes down those started before it.
func start(ctx context.Context, dir string, devServer bool, log *zap.Logger) (*env, error) {
	e := &env{log: log}
	modelAddr, err := e.startModel()
	if err != nil {
		return nil, err
	}
	if err := e.startServices(); err != nil {
		_ = e.http.Close()
		return nil, err
	}
	if err := e.startTopology(ctx, dir, devServer, modelAddr); err != nil {
		e.api.Kill()
		e.mcp.Kill()
		_ = e.http.Close()
		e.closeProxies()
		return nil, err
	}
	if err := e.connect(ctx); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// startModel serves the scripted model on a loopback port and returns its
// address.
func (e *env) startModel() (string, error) {
	e.model.Store(scripted.New(script(nil), scripted.Options{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: model listener: %w", err)
	}
	// The model stays up while everything else is broken: it is the
	// one part outside the system under test.
	e.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := e.embedDelay.Load(); d > 0 && strings.HasSuffix(r.URL.Path, "/embeddings") {
			time.Sleep(time.Duration(d))
		}
		e.model.Load().ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.http.Serve(ln) }()
	return ln.Addr().String(), nil
}

// startServices starts the tenant's HTTP API (items, ledger, journal,
// stock) and its MCP server; on error nothing of them is left running.
func (e *env) startServices() error {
	var err error
	e.ledger = newLedger()
	api := http.NewServeMux()
	api.Handle("POST /ledger", e.ledger)
	e.journal = newJournal()
	api.Handle("POST /journal", e.journal)
	api.HandleFunc("GET /stock", e.serveStock)
	api.HandleFunc("/", serveItems)
	if e.api, err = mcptest.StartCrashable(func() http.Handler { return api }); err != nil {
		return err
	}
	e.mcpCalls = make(chan string, 16)
	if e.mcp, err = mcptest.Start(mcptest.Options{OnCall: func(tool string) {
		select {
		case e.mcpCalls <- tool:
		default:
		}
	}}); err != nil {
		e.api.Kill()
		return err
	}
	return nil
}

// startTopology starts the Temporal server, PostgreSQL, the workers and
// the gateways, pointed at the model at modelAddr and allowed to reach the
// tenant's services.
func (e *env) startTopology(ctx context.Context, dir string, devServer bool, modelAddr string) error {
	var proxyErr error
	top, err := topology.Start(ctx, topology.Options{
		Dir: dir, Workers: 2, Gateways: 2, TemporalPort: -1, Logger: e.log, DevServer: devServer,
		// Each worker reaches Temporal through a proxy the partition
		// trials cut (proxy.go); the gateways reach it directly.
		WorkerEnv: func(_ int, stack *devstack.Stack) []string {
			p, err := newCutProxy(stack.TemporalAddress)
			if err != nil {
				proxyErr = errors.Join(proxyErr, err)
				return nil
			}
			e.proxies = append(e.proxies, p)
			// The workers serve the suite's Nexus endpoint (nexus.go).
			return []string{"TEMPORAL_ADDRESS=" + p.Addr(), nexusBinding}
		},
		Env: []string{
			"OPENAI_BASE_URL=http://" + modelAddr + "/v1",
			"OPENAI_API_KEY=chaos",
			"AGENTFLOW_SCRIPT=",
			"AGENTFLOW_TOKENS=" + token + "=" + tenant + ":user+approver+admin:chaos",
			"AGENTFLOW_LOG_LEVEL=info",
			// The tenant's API and MCP server listen on loopback.
			"AGENTFLOW_EGRESS_ALLOW=" + e.api.Addr + "," + e.mcp.Addr,
		},
	})
	e.top = top
	return errors.Join(err, proxyErr)
}

// connect dials every gateway, opens the database and applies the chaos
// tenant's catalog.
func (e *env) connect(ctx context.Context) error {
	for _, g := range e.top.Gateways {
		conn, err := grpc.NewClient(g.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("chaos: dial %s: %w", g.Name, err)
		}
		e.conns = append(e.conns, conn)
	}
	var err error
	if e.db, err = pgxpool.New(ctx, e.top.DatabaseURL); err != nil {
		return fmt.Errorf("chaos: open database: %w", err)
	}
	actx := e.auth(ctx)
	if _, err := pb.NewCatalogServiceClient(e.conns[0]).UpsertCatalog(actx, &pb.UpsertCatalogRequest{
		Files: map[string]string{"chaos.yaml": fmt.Sprintf(catalog, e.api.Addr, e.mcp.Addr, e.mcp.URL)},
	}); err != nil {
		return fmt.Errorf("chaos: apply catalog: %w", err)
	}
	return nil
}

func (e *env) stop() {
	for _, c := range e.conns {
		_ = c.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	if e.top != nil {
		if err := e.top.Stop(); err != nil {
			e.log.Warn("stop topology", zap.Error(err))
		}
	}
	_ = e.http.Close()
	e.api.Kill()
	e.mcp.Kill()
	e.closeProxies()
}

// closeProxies stops the workers' proxies to Temporal.
func (e *env) closeProxies() {
	for _, p := range e.proxies {
		_ = p.Close()
	}
}

func (e *env) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// heal starts every process a trial left down.
func (e *env) heal(ctx context.Context) error {
	for _, p := range e.proxies {
		p.Restore()
	}
	for _, p := range e.top.Processes() {
		if !p.Running() {
			if err := p.Start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
