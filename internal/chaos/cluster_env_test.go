package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/checker"
	"github.com/agentflow/agentflow/internal/cluster"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The cluster trials' tenant and its token.
const (
	clTenant = "trials"
	clToken  = "trials-token"
)

// clusterEnv is the cluster with the trial's own servers: the model and
// the two counting APIs the tools write to, on this machine's address on
// the cluster's network.
type clusterEnv struct {
	c *cluster.Cluster
	// writes deduplicates nothing (each write at most once); idem honours
	// the Idempotency-Key (each write exactly once).
	writes, idem *checker.CountingAPI
	srv          *http.Server
	conn         *grpc.ClientConn
	temporal     client.Client
	db           *pgxpool.Pool
	log          *zap.Logger
	// tap, when set, is told of each write to the journal by the address
	// of the host that sent it, before the write counts.
	tap atomic.Pointer[func(host string)]
}

// startCluster starts the cluster, the trial's servers and the clients,
// and applies the tenant's catalog.
func startCluster(ctx context.Context, dir string, log *zap.Logger) (*clusterEnv, error) {
	e := &clusterEnv{writes: &checker.CountingAPI{Delay: clWriteDelay}, idem: &checker.CountingAPI{Deduplicate: true, Delay: clWriteDelay}, log: log}
	var apiAddr string
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, Logger: log,
		Prepare: func(gateway string) ([]string, error) {
			ln, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
			if err != nil {
				return nil, err
			}
			apiAddr = ln.Addr().String()
			model := scripted.New(clusterScript(), scripted.Options{MaxRecorded: 1})
			mux := http.NewServeMux()
			mux.Handle("/v1/", model)
			mux.Handle("POST /writes", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tap := e.tap.Load(); tap != nil {
					host, _, _ := net.SplitHostPort(r.RemoteAddr)
					(*tap)(host)
				}
				e.writes.ServeHTTP(w, r)
			}))
			mux.Handle("POST /idem", e.idem)
			mux.HandleFunc("GET /big", serveBig)
			e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = e.srv.Serve(ln) }()
			return []string{
				"OPENAI_BASE_URL=http://" + apiAddr + "/v1", "OPENAI_API_KEY=trials", "AGENTFLOW_SCRIPT=",
				"AGENTFLOW_TOKENS=" + clToken + "=" + clTenant + ":user+approver+admin:trials",
				"AGENTFLOW_LOG_LEVEL=info", "AGENTFLOW_EGRESS_ALLOW=" + apiAddr,
			}, nil
		}})
	if err != nil {
		if e.srv != nil {
			_ = e.srv.Close()
		}
		return nil, err
	}
	e.c = c
	if err := e.connect(ctx, apiAddr); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// connect dials the gateways (through the client's link and the
// balancer), Temporal and the database, and applies the catalog.
func (e *clusterEnv) connect(ctx context.Context, apiAddr string) error {
	var err error
	// Keepalives find a connection a cut link left hanging.
	e.conn, err = grpc.NewClient(e.c.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		return fmt.Errorf("dial gateways: %w", err)
	}
	if e.temporal, err = client.Dial(client.Options{HostPort: e.c.TemporalAddress, Namespace: devstack.DefaultNamespace, Logger: quiet{}}); err != nil {
		return fmt.Errorf("dial temporal: %w", err)
	}
	if e.db, err = pgxpool.New(ctx, e.c.DatabaseURL); err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	_, err = pb.NewCatalogServiceClient(e.conn).UpsertCatalog(e.auth(ctx), &pb.UpsertCatalogRequest{
		Files: map[string]string{clTenant + ".yaml": fmt.Sprintf(clusterCatalog, apiAddr)}})
	if err != nil {
		return fmt.Errorf("apply catalog: %w", err)
	}
	return nil
}

func (e *clusterEnv) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+clToken)
}

func (e *clusterEnv) stop() error {
	var errs []error
	if e.conn != nil {
		errs = append(errs, e.conn.Close())
	}
	if e.temporal != nil {
		e.temporal.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	if e.c != nil {
		errs = append(errs, e.c.Stop())
	}
	if e.srv != nil {
		errs = append(errs, e.srv.Close())
	}
	return errors.Join(errs...)
}

// clWriteDelay holds each write's answer: long enough that a fault often
// lands with a write in flight.
const clWriteDelay = 300 * time.Millisecond

// clusterCatalog is the trials' tenant: an agent whose tools write to the
// counting APIs, one of them only once a person approves.
var clusterCatalog = `
tenant: ` + clTenant + `
default_agent: writer
egress: ["%[1]s"]
tools:
  - name: append
    kind: openapi_action
    approval: never
    description: Appends an entry to the journal, which deduplicates nothing.
    config: {server: "http://%[1]s", spec: {openapi: 3.0.3, info: {title: Journal, version: "1"}, paths: {/writes: {post: ` + clOp("append", false) + `}}}}
  - name: record
    kind: openapi_action
    approval: never
    description: Records an entry in the ledger, which honours the Idempotency-Key.
    config: {server: "http://%[1]s", spec: {openapi: 3.0.3, info: {title: Ledger, version: "1"}, paths: {/idem: {post: ` + clOp("record", true) + `}}}}
  - name: guarded_append
    kind: openapi_action
    approval: always
    description: Appends an entry to the journal once a person approves.
    config: {server: "http://%[1]s", spec: {openapi: 3.0.3, info: {title: Journal, version: "1"}, paths: {/writes: {post: ` + clOp("guardedAppend", false) + `}}}}
  # The checker's own trial: a tool that claims the journal deduplicates,
  # which switches the at-most-once protection off.
  - name: careless_append
    kind: openapi_action
    approval: never
    delivery: idempotent
    description: Appends an entry to the journal.
    config: {server: "http://%[1]s", spec: {openapi: 3.0.3, info: {title: Journal, version: "1"}, paths: {/writes: {post: ` + clOp("carelessAppend", false) + `}}}}
  - name: fetch_big
    kind: openapi_action
    approval: never
    description: Fetches the large report.
    config: {server: "http://%[1]s", max_response_bytes: 8388608, spec: {openapi: 3.0.3, info: {title: Reports, version: "1"}, paths: {/big: {get: {operationId: big, parameters: [{name: job, in: query, required: true, schema: {type: string}}], responses: {"200": {description: the report, content: {application/json: {schema: {type: array, items: {type: object}}}}}}}}}}}
agents:
  - id: careless
    description: Writes entries, trusting the journal to deduplicate.
    model: openai:gpt-4o-mini
    system_prompt: Write the entries you are asked to.
    tools: [careless_append]
    limits: {max_iterations: 6, turn_timeout_sec: 600}
  - id: writer
    description: Writes entries, and chats.
    model: openai:gpt-4o-mini
    system_prompt: Write the entries you are asked to.
    tools: [append, record, guarded_append, fetch_big]
    limits: {max_iterations: 6, turn_timeout_sec: 600}
`

// clOp is an OpenAPI operation that posts {job, i} to a counting API,
// declaring the Idempotency-Key when the API honours it.
func clOp(id string, idempotent bool) string {
	params := ""
	if idempotent {
		params = `parameters: [{name: Idempotency-Key, in: header, schema: {type: string}}], `
	}
	return `{operationId: ` + id + `, ` + params + `requestBody: {required: true, content: {application/json: {schema: {type: object, properties: {job: {type: string}, i: {type: integer}}, required: [job, i]}}}}, ` +
		`responses: {"200": {description: counted, content: {application/json: {schema: {type: object}}}}}}`
}

// clusterScript is the trials' model: writes in parallel calls of one
// step, a guarded write, a chat answer and a probe's answer.
func clusterScript() *scripted.Script {
	calls := func(tool, op string, n int) []scripted.ToolCallSpec {
		var out []scripted.ToolCallSpec
		for i := range n {
			out = append(out, scripted.ToolCallSpec{Name: tool,
				Arguments: fmt.Sprintf(`{"operation_id": %q, "body": {"job": "${job}", "i": %d}}`, op, i)})
		}
		return out
	}
	return &scripted.Script{
		Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 15},
		Rules: []scripted.Rule{
			{Name: "done", When: scripted.When{User: `^(write|record|guard|careless|big) for (?P<job>\S+)$`, Tool: `(?s).`}, Reply: scripted.Reply{Text: "Done with the entries of ${job}, as asked."}},
			{Name: "write", When: scripted.When{User: `^write for (?P<job>\S+)$`}, Reply: scripted.Reply{ToolCalls: calls("append", "append", 3)}},
			{Name: "record", When: scripted.When{User: `^record for (?P<job>\S+)$`}, Reply: scripted.Reply{ToolCalls: calls("record", "record", 3)}},
			{Name: "careless", When: scripted.When{User: `^careless for (?P<job>\S+)$`}, Reply: scripted.Reply{ToolCalls: calls("careless_append", "carelessAppend", 3)}},
			{Name: "big", When: scripted.When{User: `^big for (?P<job>\S+)$`}, Reply: scripted.Reply{ToolCalls: []scripted.ToolCallSpec{{Name: "fetch_big", Arguments: `{"operation_id": "big", "params": {"job": "${job}"}}`}}}},
			{Name: "guard", When: scripted.When{User: `^guard for (?P<job>\S+)$`}, Reply: scripted.Reply{ToolCalls: calls("guarded_append", "guardedAppend", 1)}},
			{Name: "chat", When: scripted.When{User: `^say (?P<word>\S+)$`}, Reply: scripted.Reply{Text: "You said ${word}, and I heard it."}},
			{Name: "probe", When: scripted.When{User: `^ping$`}, Reply: scripted.Reply{Text: "pong"}},
		},
	}
}

// clusterDir is a folder for the cluster's state and logs.
func clusterDir() (string, error) {
	dir, err := os.MkdirTemp("", "cluster-trials-*")
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
}

// bigRows is the rows of the large report: about 3 MB, a blob the object
// store keeps (above objstore.DefaultMinBlobBytes).
const bigRows = 24000

// serveBig answers the large report of a turn: its own bytes (the job is
// in every row), so that each turn keeps a blob of its own.
func serveBig(w http.ResponseWriter, r *http.Request) {
	job := r.URL.Query().Get("job")
	w.Header().Set("Content-Type", "application/json")
	// An array of rows: a dataset, which the tool keeps as a blob.
	_, _ = io.WriteString(w, `[`)
	for i := range bigRows {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = fmt.Fprintf(w, `{"i":%d,"job":%q,"text":"row %d of the large report, with words enough to weigh a hundred"}`, i, job, i)
	}
	_, _ = io.WriteString(w, "]")
}
