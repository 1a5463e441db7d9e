package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// testCatalog gives the tenant "demo" one agent with a tool that counts
// its runs (tally), so that a test can tell whether a tool ran again;
// execute_pipeline, uncached, with the harness's API (API) in the
// tenant's egress allowlist; and a tool that returns what its arguments
// say (echo_data); a tool whose data comes with a preview of its own that
// shows its rows whole (own_preview); and delegate_to_agent, whose calls
// the workflow runs. A second agent, coder, writes programs that call
// calculator, tally and echo_data (code mode), each run of one computing
// for at most a second.
const testCatalog = `
tenant: demo
default_agent: assistant
egress: ["API"]
tools:
  - name: calculator
    kind: calculator
  - name: tally
    kind: tally
  - name: execute_pipeline
    kind: execute_pipeline
    config: {cache_ttl_sec: 0}
  - name: echo_data
    kind: echo_data
  - name: own_preview
    kind: own_preview
  - name: delegate
    kind: delegate_to_agent
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Be brief.
    tools: [calculator, tally, execute_pipeline, echo_data, own_preview, delegate]
  - id: coder
    model: openai:gpt-4o-mini
    tools: [calculator, tally, echo_data]
    # Generous: a program's time is the machine's, and under the race
    # detector beside other builds a program that reads 40 KB of data
    # took more than a second.
    code_mode: {tools: [calculator, tally, echo_data], time_sec: 60}
  - id: quick-coder
    model: openai:gpt-4o-mini
    tools: [calculator]
    code_mode: {tools: [calculator], time_sec: 1}
`

// testDataInline is the harness's DataInlineBytes: small, so that tests
// of data kept by ref stay small too.
const testDataInline = 512

// harness is the activities on real servers: a fresh Postgres database,
// the Temporal dev server, and a scripted model reached over HTTP by the
// real provider client. Activities run in a TestActivityEnvironment where
// they are registered by name, as a worker registers them. Each harness
// has its own database and model, so tests that use one run in parallel.
type harness struct {
	acts     *Activities
	store    *store.Store
	model    *scripted.Server
	temporal client.Client
	env      *testsuite.TestActivityEnvironment
	beats    *heartbeatRecorder
	toolRuns *atomic.Int32
	// api answers GET /rows with a table of three rows, and GET
	// /big-row?bytes=N with one row of N bytes, counting calls.
	api     *httptest.Server
	apiHits *atomic.Int32
	tenants *tenant.Cache
}

// applyCatalog applies cat and drops the activities' snapshot of it, as
// the catalog's notification does in a worker.
func (h *harness) applyCatalog(ctx context.Context, cat agent.Catalog, dryRun bool) (store.ApplyReport, error) {
	r, err := h.store.ApplyCatalog(ctx, cat, dryRun)
	h.tenants.Invalidate("")
	return r, err
}

// newHarness starts a harness; configure, if given, changes the
// activities' dependencies before they are built.
func newHarness(t *testing.T, modelScript string, configure ...func(*Deps)) *harness {
	t.Helper()
	ctx := context.Background()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	st, err := store.Open(ctx, devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	script, err := scripted.Parse([]byte(modelScript))
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", script, scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	model, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL(), OpenAIAPIKey: "test"})
	require.NoError(t, err)

	hits := &atomic.Int32{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/big-row" {
			n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
			_, _ = io.WriteString(w, `[{"id":1,"blob":"`+strings.Repeat("a", max(0, n-22))+`"}]`)
			return
		}
		_, _ = io.WriteString(w, `[{"id":1,"price":300},{"id":2,"price":100},{"id":3,"price":200}]`)
	}))
	t.Cleanup(api.Close)

	runs := &atomic.Int32{}
	// The operator opens the test's API on loopback, as
	// AGENTFLOW_EGRESS_ALLOW would.
	op, err := egress.OpenOperator(strings.TrimPrefix(api.URL, "http://"))
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Logger: logger, Egress: op}, append(tools.Builtin(), tallyKind(runs), echoDataKind(), ownPreviewKind())...)
	require.NoError(t, err)
	cat, err := catalog.Parse(kinds, "t.yaml", []byte(strings.ReplaceAll(testCatalog, "API", strings.TrimPrefix(api.URL, "http://"))))
	require.NoError(t, err)
	_, err = st.ApplyCatalog(ctx, cat, false)
	require.NoError(t, err)

	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: sdkLogger(logger)})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	tenants := tenant.NewCache(st, op, logger)
	deps := Deps{
		Store: st, Model: model, Tools: kinds, Tenants: tenants, Logger: logger, Temporal: c,
		StreamInterval: 50 * time.Millisecond, DataInlineBytes: testDataInline,
	}
	for _, f := range configure {
		f(&deps)
	}
	acts, err := New(deps)
	require.NoError(t, err)

	env, beats := newActivityEnv(logger)
	acts.Register(env)
	return &harness{acts: acts, store: st, model: srv, temporal: c, env: env, beats: beats, toolRuns: runs, api: api, apiHits: hits, tenants: tenants}
}

// newActivityEnv is a TestActivityEnvironment whose heartbeats are
// recorded.
func newActivityEnv(logger *zap.Logger) (*testsuite.TestActivityEnvironment, *heartbeatRecorder) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdkLogger(logger))
	env := suite.NewTestActivityEnvironment()
	beats := &heartbeatRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{beats}})
	return env, beats
}

func sdkLogger(logger *zap.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(zapslog.NewHandler(logger.Core())))
}

// loadAgent starts a turn of job with the agent "assistant" (LoadAgent
// stores the prompt as step 0) and returns the pinned agent.
func (h *harness) loadAgent(t *testing.T, job, prompt string) agent.Agent {
	t.Helper()
	var res contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, loadAgentInput(job, prompt), &res)
	require.Nil(t, res.Existing)
	require.Equal(t, "assistant", res.Agent.ID)
	return res.Agent
}

func loadAgentInput(job, prompt string) contract.LoadAgentInput {
	return contract.LoadAgentInput{
		Request:    agent.TurnRequest{TenantID: "demo", JobID: job, AgentID: "assistant", SessionID: "session-1", Prompt: prompt},
		WorkflowID: contract.TurnWorkflowID("demo", job),
		AgentID:    "assistant",
	}
}

// callModelInput asks for the reply to the turn's prompt, as step 1.
func callModelInput(job string, ag agent.Agent) contract.CallModelInput {
	return contract.CallModelInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 1}
}

// execute runs the activity registered under name and decodes its result.
func (h *harness) execute(t *testing.T, name string, in, out any) {
	t.Helper()
	val, err := h.env.ExecuteActivity(name, in)
	require.NoError(t, err)
	require.NoError(t, val.Get(out))
}

// heartbeatRecorder is a worker interceptor that records every
// activity.RecordHeartbeat. The SDK sends an activity's first heartbeat
// at once and batches the later ones over a throttle window (30 s without
// a heartbeat timeout, as in TestActivityEnvironment), so the
// environment's heartbeat listener sees only the first: the interceptor
// sees every heartbeat the activity reports.
type heartbeatRecorder struct {
	interceptor.WorkerInterceptorBase

	mu    sync.Mutex
	beats []int64
}

func (r *heartbeatRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heartbeatInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, r: r}
}

// all returns the heartbeats so far, in order.
func (r *heartbeatRecorder) all() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.beats...)
}

func (r *heartbeatRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.beats = nil
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	r *heartbeatRecorder
}

func (i *heartbeatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&heartbeatOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}, r: i.r})
}

type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	r *heartbeatRecorder
}

func (o *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) == 1 {
		if index, ok := details[0].(int64); ok {
			o.r.mu.Lock()
			o.r.beats = append(o.r.beats, index)
			o.r.mu.Unlock()
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// tallyKind is a tool kind whose tools count their runs and answer with
// the count.
func tallyKind(runs *atomic.Int32) tools.Kind {
	return tools.Kind{
		Name:        "tally",
		Description: "Counts its calls.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {}}`),
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) {
			return tallyTool{runs}, nil
		},
	}
}

type tallyTool struct{ runs *atomic.Int32 }

// echoDataKind is a tool kind whose tools return the output their
// arguments describe: {"text", "data", "show"}.
func echoDataKind() tools.Kind {
	return tools.Kind{
		Name:        "echo_data",
		Description: "Returns the output its arguments describe.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"text": {"type": "string"}, "data": {}, "show": {"type": "boolean"}}}`),
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) {
			return echoDataTool{}, nil
		},
	}
}

type echoDataTool struct{}

func (echoDataTool) Run(_ context.Context, call tools.Call) (tools.Output, error) {
	var args struct {
		Text string          `json:"text"`
		Data json.RawMessage `json:"data"`
		Show bool            `json:"show"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%v", err)
	}
	return tools.Output{Text: args.Text, Data: args.Data, ShowData: args.Show}, nil
}

// ownPreviewKind is a tool kind whose tools return a dataset of one row
// of {"bytes": N} bytes with a preview of their own that shows the row
// whole, as a tool that knows its data's shape may.
func ownPreviewKind() tools.Kind {
	return tools.Kind{
		Name:        "own_preview",
		Description: "Returns one large row with its own preview.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"bytes": {"type": "integer"}}}`),
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) {
			return ownPreviewTool{}, nil
		},
	}
}

type ownPreviewTool struct{}

func (ownPreviewTool) Run(_ context.Context, call tools.Call) (tools.Output, error) {
	var args struct {
		Bytes int `json:"bytes"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%v", err)
	}
	row := json.RawMessage(`{"id":1,"blob":"` + strings.Repeat("b", max(0, args.Bytes-20)) + `"}`)
	data := append(append([]byte{'['}, row...), ']')
	return tools.Output{Text: "one row", Data: data, Preview: &agent.DataPreview{Type: agent.DataDataset, RowCount: 1,
		Fields: []agent.Field{{Name: "id", Type: "number"}, {Name: "blob", Type: "string"}}, Sample: []json.RawMessage{row}}}, nil
}

func (t tallyTool) Run(context.Context, tools.Call) (tools.Output, error) {
	return tools.Output{Text: fmt.Sprintf("run %d", t.runs.Add(1))}, nil
}
