package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// observeCatalogs are two tenants: obs-a routes by a rule whose condition
// fails on requests without a plan (a rule error, then the default
// agent); obs-b's calculator needs a person's approval.
var observeCatalogs = []string{`
tenant: obs-a
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: gold
    model: openai:gpt-4o-mini
rules:
  - name: gold-plan
    priority: 10
    when: 'metadata.plan == "gold"'
    agent: gold
`, strings.Replace(careCatalog, "tenant: care", "tenant: obs-b", 1)}

// observeScript is testScript with a model that calls a tool no agent has.
var observeScript = strings.Replace(testScript, "rules:\n", `rules:
  - name: made-up
    when: {user: '^hammer'}
    reply: {tool_calls: [{name: hammer, arguments: '{}'}]}
`, 1)

// TestMetricsAfterTurnsOfTwoTenants scrapes /metrics after turns of two
// tenants and checks every turn metric's count, and that the Temporal
// SDK's own metrics are there.
func TestMetricsAfterTurnsOfTwoTenants(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: observeScript, Catalogs: observeCatalogs, HTTP: true,
		Tokens: map[string]string{"obs-a-token": "obs-a"}})
	e := &env{Server: ts, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// obs-a: two calculator turns, one streamed through the gateway, and
	// a request for an agent the tenant does not have.
	tokensA := 0
	for i, prompt := range []string{"What is 6 * 7?", "What is 2 + 3?"} {
		job := fmt.Sprintf("obs-a-%d-%s", i, testserver.RandomID())
		if i == 0 {
			gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer obs-a-token")
			r, err := grpcturn.Stream(gctx, pb.NewAgentServiceClient(ts.Conn), &pb.TurnRequest{JobId: job, Prompt: prompt})
			require.NoError(t, err)
			require.Equal(t, pb.Status_STATUS_COMPLETED, r.Status)
			require.Equal(t, "The result is 42.", r.Text)
			res, err := e.result(contract.TurnWorkflowID("obs-a", job))
			require.NoError(t, err)
			tokensA += res.Metadata.TokensUsed
			continue
		}
		id := contract.TurnWorkflowID("obs-a", job)
		e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"obs-a","job_id":%q,"prompt":%q}`, job, prompt))
		res, err := e.result(id)
		require.NoError(t, err)
		require.Equal(t, "The result is 5.", res.Output)
		tokensA += res.Metadata.TokensUsed
	}
	// A tool the agent does not have is not a label of its own.
	job := "obs-a-hammer-" + testserver.RandomID()
	e.startWithCLI(contract.TurnWorkflowID("obs-a", job), fmt.Sprintf(`{"tenant_id":"obs-a","job_id":%q,"prompt":"hammer it"}`, job))
	res, err := e.result(contract.TurnWorkflowID("obs-a", job))
	require.NoError(t, err)
	tokensA += res.Metadata.TokensUsed
	job = "obs-a-missing-" + testserver.RandomID()
	e.startWithCLI(contract.TurnWorkflowID("obs-a", job), fmt.Sprintf(`{"tenant_id":"obs-a","job_id":%q,"agent_id":"nobody","prompt":"hi"}`, job))
	_, err = e.result(contract.TurnWorkflowID("obs-a", job))
	require.Error(t, err)

	// obs-b: a call approved, one rejected, each after the worker's
	// cache lost the turn.
	tokensB := 0
	for i, approved := range []bool{true, false} {
		job := fmt.Sprintf("obs-b-%d-%s", i, testserver.RandomID())
		id := contract.TurnWorkflowID("obs-b", job)
		e.startWithCLI(id, fmt.Sprintf(`{"tenant_id":"obs-b","job_id":%q,"prompt":"What is 6 * 7?"}`, job))
		p := e.awaitPending(id)
		// The worker forgets the turn: the decision's task replays it from
		// its history, and what the replay meets again is not counted again.
		sdkworker.PurgeStickyWorkflowCache()
		out, err := e.Temporal("workflow", "update", "execute", "--workflow-id", id, "--name", "approve",
			"--input", fmt.Sprintf(`{"call_id":%q,"approved":%t,"approver":"ana"}`, p.CallID, approved))
		require.NoError(t, err, out)
		res, err := e.result(id)
		require.NoError(t, err)
		tokensB += res.Metadata.TokensUsed
	}

	m := scrape(t, ts.HTTPAddr())
	workflow := map[string]string{"workflow_type": "AgentTurn"}
	require.GreaterOrEqual(t, m.sum("temporal_sticky_cache_miss_total", workflow), 2.0, "the decisions' tasks replayed the turns")
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"turns_total", map[string]string{"tenant": "obs-a", "agent": "assistant", "status": agent.StatusCompleted}, 3},
		{"turns_total", map[string]string{"tenant": "obs-a", "agent": "-", "status": agent.StatusRejected}, 1},
		{"turns_total", map[string]string{"tenant": "obs-b", "agent": "careful", "status": agent.StatusCompleted}, 2},
		{"agent_latency_seconds_count", map[string]string{"tenant": "obs-a", "agent": "assistant", "status": agent.StatusCompleted}, 3},
		{"agent_latency_seconds_count", map[string]string{"tenant": "obs-b", "status": agent.StatusCompleted}, 2},
		{"tool_invocations_total", map[string]string{"tenant": "obs-a", "tool": "calculator", "status": agent.ToolOK}, 2},
		{"tool_invocations_total", map[string]string{"tenant": "obs-a", "tool": "-", "status": agent.ToolError}, 1},
		{"tool_invocations_total", map[string]string{"tool": "hammer"}, 0},
		{"tool_invocations_total", map[string]string{"tenant": "obs-b", "tool": "calculator", "status": agent.ToolOK}, 1},
		{"tool_invocations_total", map[string]string{"tenant": "obs-b", "tool": "calculator", "status": agent.ApprovalRejected}, 1},
		{"approvals_total", map[string]string{"tenant": "obs-b", "tool": "calculator", "outcome": agent.ApprovalApproved}, 1},
		{"approvals_total", map[string]string{"tenant": "obs-b", "tool": "calculator", "outcome": agent.ApprovalRejected}, 1},
		{"approval_wait_seconds_count", map[string]string{"tenant": "obs-b"}, 2},
		// Every obs-a turn that was routed skipped the failing rule.
		{"routing_mismatch_total", map[string]string{"tenant": "obs-a", "rule": "gold-plan", "reason": "rule_error"}, 3},
		{"model_tokens_total", map[string]string{"tenant": "obs-a", "model": "openai:gpt-4o-mini"}, float64(tokensA)},
		{"model_tokens_total", map[string]string{"tenant": "obs-b", "model": "openai:gpt-4o-mini"}, float64(tokensB)},
		{"turns_total", workflow, 6},
		// Each turn is counted under the door it came through: the
		// streamed one through gRPC, the others started on Temporal.
		{"turns_total", map[string]string{"tenant": "obs-a", "status": agent.StatusCompleted, "channel": agent.ChannelGRPC}, 1},
		{"turns_total", map[string]string{"tenant": "obs-a", "status": agent.StatusCompleted, "channel": agent.ChannelTemporal}, 2},
		{"turns_total", map[string]string{"tenant": "obs-a", "status": agent.StatusRejected, "channel": agent.ChannelTemporal}, 1},
		{"turns_total", map[string]string{"tenant": "obs-b", "channel": agent.ChannelTemporal}, 2},
		{"agent_latency_seconds_count", map[string]string{"tenant": "obs-a", "channel": agent.ChannelGRPC}, 1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, m.sum(tt.name, tt.labels), "%s%v\n%s", tt.name, tt.labels, m.dump(tt.name))
	}
	require.Positive(t, m.sum("model_tokens_total", map[string]string{"kind": "input"}))
	require.Positive(t, m.sum("model_tokens_total", map[string]string{"kind": "output"}))
	require.Positive(t, m.sum("stream_lag_seconds_count", nil), "the streamed turn's batches came through the live path")
	for _, name := range []string{
		"temporal_workflow_task_execution_latency_seconds_count",
		"temporal_activity_execution_latency_seconds_count",
		"temporal_workflow_completed_total",
		"temporal_request_total",
		"rpc_server_call_duration_seconds_count",
	} {
		require.Positive(t, m.sum(name, nil), "metric %s\n%s", name, m.names())
	}
}

// scraped is one scrape of /metrics, or one gathering of a registry.
type scraped map[string]*dto.MetricFamily

// gathered reads the worker's registry as /metrics shows it.
func gathered(t *testing.T, g prometheus.Gatherer) scraped {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	s := scraped{}
	for _, f := range families {
		s[f.GetName()] = f
	}
	return s
}

func scrape(t *testing.T, addr string) scraped {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sum adds the values of name's series (a counter's, or a histogram's
// count or sum, by suffix) whose labels include labels.
func (s scraped) sum(name string, labels map[string]string) float64 {
	family, field := name, ""
	if _, ok := s[name]; !ok {
		for _, suffix := range []string{"_count", "_sum"} {
			if strings.HasSuffix(name, suffix) {
				family, field = strings.TrimSuffix(name, suffix), suffix
			}
		}
	}
	f, ok := s[family]
	if !ok {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case field == "_count" && m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		case field == "_sum" && m.GetHistogram() != nil:
			total += m.GetHistogram().GetSampleSum()
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}

// dump shows a family's series, for a failing assertion.
func (s scraped) dump(name string) string {
	for _, suffix := range []string{"_count", "_sum"} {
		name = strings.TrimSuffix(name, suffix)
	}
	f, ok := s[name]
	if !ok {
		return "no metric " + name
	}
	var b strings.Builder
	for _, m := range f.GetMetric() {
		fmt.Fprintf(&b, "%v\n", m)
	}
	return b.String()
}

func (s scraped) names() string {
	var names []string
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// TestHealthz checks readiness per dependency (at /healthz and its alias
// /health): ready while Postgres and Temporal answer, 503 naming Postgres
// once the database refuses connections, while /livez still answers.
func TestHealthz(t *testing.T) {
	dbURL := devtest.Database(t)
	ts := testserver.Start(t, testserver.Options{Script: testScript, DatabaseURL: dbURL, HTTP: true})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ts.HTTPAddr() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	type check struct {
		Name, Status string
	}
	checks := func(body string) (string, []check) {
		var h struct {
			Status string
			Checks []check
		}
		require.NoError(t, json.Unmarshal([]byte(body), &h), body)
		return h.Status, h.Checks
	}

	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get("/healthz")
		return code == http.StatusOK && !strings.Contains(body, "degraded")
	}, 30*time.Second, 100*time.Millisecond, "the live path connects")
	status, cs := checks(body)
	require.Equal(t, "ok", status)
	require.Equal(t, []check{{"postgres", "ok"}, {"temporal", "ok"}, {"live_path", "ok"}}, cs)
	code, body = get("/health") // seed 004's name for it
	require.Equal(t, http.StatusOK, code, body)
	status, cs = checks(body)
	require.Equal(t, "ok", status)
	require.Len(t, cs, 3)

	devtest.RefuseConnections(t, dbURL)
	for _, path := range []string{"/healthz", "/health"} {
		code, body = get(path)
		require.Equal(t, http.StatusServiceUnavailable, code, body)
		status, cs = checks(body)
		require.Equal(t, "unavailable", status)
		require.Equal(t, check{"postgres", "unavailable"}, cs[0])
		require.Equal(t, check{"temporal", "ok"}, cs[1])
	}

	code, _ = get("/livez")
	require.Equal(t, http.StatusOK, code)
}
