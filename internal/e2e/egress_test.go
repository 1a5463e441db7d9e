package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// egressScript fetches whatever URL the prompt names with
// execute_pipeline, and says what came back.
const egressScript = `
rules:
  - name: fetch
    when: {user: '^fetch (?P<url>\S+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "${url}"}]}'
  - name: rows
    when: {tool: 'a table of (?P<rows>[0-9]+) rows?'}
    reply: {text: 'Fetched ${rows} rows.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
  - name: answer
    reply: {text: 'Done.'}
`

// egressCatalog is tenant b's: execute_pipeline under the egress entries
// EGRESS stands for.
const egressCatalog = `tenant: b
default_agent: fetcher
egress: EGRESS
tools:
  - {name: execute_pipeline, kind: execute_pipeline}
agents:
  - id: fetcher
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// tenantA is the tenant whose turns b's tools must not reach.
const tenantA = `tenant: a
default_agent: plain
agents:
  - {id: plain, model: openai:gpt-4o-mini}
`

func catalogFor(entries ...string) string {
	list, _ := json.Marshal(entries)
	return strings.Replace(egressCatalog, "EGRESS", string(list), 1)
}

// egressEnv is a worker with the gateway, tenant a and tenant b's admin.
type egressEnv struct {
	*testserver.Server
	t       *testing.T
	catalog pb.CatalogServiceClient
	agents  pb.AgentServiceClient
}

func newEgressEnv(t *testing.T, allow []string) *egressEnv {
	t.Helper()
	ts := testserver.Start(t, testserver.Options{Script: egressScript, Catalogs: []string{tenantA}, EgressAllow: allow,
		Tokens: map[string]string{"tok-a": "a:user", "tok-b": "b:user+admin:eve"}})
	return &egressEnv{Server: ts, t: t, catalog: pb.NewCatalogServiceClient(ts.Conn), agents: pb.NewAgentServiceClient(ts.Conn)}
}

func withToken(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// apply applies tenant b's catalog through the gateway, as its admin.
func (e *egressEnv) apply(doc string) error {
	_, err := e.catalog.UpsertCatalog(withToken("tok-b"), &pb.UpsertCatalogRequest{Files: map[string]string{"b.yaml": doc}})
	return err
}

// tryFetch runs a turn of tenant b that fetches u, and returns its
// answer.
func (e *egressEnv) tryFetch(u string) (string, error) {
	ctx, cancel := context.WithTimeout(withToken("tok-b"), 2*time.Minute)
	defer cancel()
	res, err := e.agents.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "fetch-" + testserver.RandomID(), Prompt: "fetch " + u}})
	if err != nil {
		return "", err
	}
	if res.GetStatus() != agent.StatusCompleted {
		return "", fmt.Errorf("turn %s: %s", res.GetStatus(), res.GetOutput())
	}
	return res.GetOutput(), nil
}

// fetch is tryFetch on the test's goroutine.
func (e *egressEnv) fetch(u string) string {
	e.t.Helper()
	out, err := e.tryFetch(u)
	require.NoError(e.t, err)
	return out
}

// eventuallyAnswers waits until fetching u answers with want (the routing
// cache takes a catalog stored behind the gateway's back on its
// notification) and returns that answer.
func (e *egressEnv) eventuallyAnswers(u, want string) string {
	e.t.Helper()
	var got string
	require.Eventually(e.t, func() bool {
		out, err := e.tryFetch(u)
		got = out
		return err == nil && strings.Contains(out, want)
	}, time.Minute, 100*time.Millisecond, "last answer: %s", got)
	return got
}

// requireRefusedAtApply asserts that the gateway refuses b's catalog with
// want, naming the file and line of the entry.
func requireRefusedAtApply(t *testing.T, err error, want string) {
	t.Helper()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "b.yaml:3: egress[0]: "+want)
}

// TestEgressPlatformPort is the finding on the real stack: tenant b's
// admin lists the Temporal frontend's HTTP API, which answers anyone with
// every tenant's workflows, and b's agent fetches from it. The operator
// has opened all of loopback (the test server's policy), yet the entry is
// refused when the catalog is applied, and the call is refused when an
// allowlist admits the port anyway: under a CIDR, or stored before the
// operator's policy existed.
func TestEgressPlatformPort(t *testing.T) {
	httpAPI := devtest.TemporalHTTPAddress(t)
	require.NotEmpty(t, httpAPI, "the test stack names its frontend's HTTP API")
	_, namespace := devtest.Temporal(t)
	_, port, _ := strings.Cut(httpAPI, ":")
	e := newEgressEnv(t, nil)

	// Tenant a has a turn; the HTTP API lists it to anyone who asks.
	res, err := e.agents.Invoke(withToken("tok-a"), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "a-" + testserver.RandomID(), Prompt: "hello"}})
	require.NoError(t, err)
	listA := "http://" + httpAPI + "/api/v1/namespaces/" + namespace + "/workflows?query=" + url.QueryEscape(`AgentflowTenant="a"`)
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get(listA)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), res.GetStreamId())
	}, time.Minute, 100*time.Millisecond, "the HTTP API shows tenant a's turn: %s", body)

	// Refused at apply, however the entry names the port.
	for _, entry := range []string{httpAPI, "localhost:" + port, "[::1]:" + port} {
		err := e.apply(catalogFor(entry))
		requireRefusedAtApply(t, err, `egress entry "`+entry+`": `)
		require.ErrorContains(t, err, "port "+port)
		require.ErrorContains(t, err, "is the Temporal frontend's HTTP API; the platform's own ports stay closed whatever the operator opens (AGENTFLOW_EGRESS_ALLOW)")
	}
	require.ErrorContains(t, e.apply(catalogFor(httpAPI)),
		`egress entry "`+httpAPI+`": 127.0.0.1 is a loopback address and port `+port+` is the Temporal frontend's HTTP API`)

	// A range the operator opened is accepted, and its other addresses
	// work; the HTTP API's port in it is refused at the call.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[{"id":1},{"id":2}]`)
	}))
	t.Cleanup(api.Close)
	require.NoError(t, e.apply(catalogFor("127.0.0.0/8")))
	require.Equal(t, "Fetched 2 rows.", e.fetch(api.URL+"/rows"))
	refusal := "address " + httpAPI + " is the Temporal frontend's HTTP API, a port of the platform's own, which no egress policy opens"
	got := e.fetch(listA)
	require.Contains(t, got, refusal)
	require.NotContains(t, got, res.GetStreamId())

	// An allowlist stored before the operator's policy named the port
	// (written as a loader that knew no platform address would have): the
	// call is refused all the same.
	op, err := egress.OpenOperator("127.0.0.0/8")
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
	require.NoError(t, err)
	require.NoError(t, testserver.ApplyCatalogs(context.Background(), e.Store(), kinds, catalogFor(httpAPI)))
	r, err := e.Store().TenantSettings(context.Background(), "b")
	require.NoError(t, err)
	require.Equal(t, []string{httpAPI}, r.Egress)
	got = e.eventuallyAnswers(listA, refusal)
	require.NotContains(t, got, res.GetStreamId())
}

// TestEgressDefaultOperator: without AGENTFLOW_EGRESS_ALLOW a tenant can
// open none of loopback, the metadata addresses or everything, whatever
// its catalog says; with one address opened, that address works and only
// it.
func TestEgressDefaultOperator(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[{"id":1},{"id":2},{"id":3}]`)
	}))
	t.Cleanup(api.Close)
	host := strings.TrimPrefix(api.URL, "http://")

	closed := newEgressEnv(t, []string{})
	for _, tt := range []struct{ entry, want string }{
		{"0.0.0.0/0", `egress entry "0.0.0.0/0": 0.0.0.0/0 includes 0.0.0.0/8, where every address is an unspecified (this-network) address; the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)`},
		{"127.0.0.0/8", `egress entry "127.0.0.0/8": every address of 127.0.0.0/8 is a loopback address (127.0.0.0/8); the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)`},
		{"169.254.169.254", `egress entry "169.254.169.254": 169.254.169.254 is a cloud metadata address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)`},
		{"fd00:ec2::254", `egress entry "fd00:ec2::254": fd00:ec2::254 is a cloud metadata address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)`},
		{"::/0", `egress entry "::/0": ::/0 includes ::/128`},
		{host, `egress entry "` + host + `": 127.0.0.1 is a loopback address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)`},
	} {
		t.Run(tt.entry, func(t *testing.T) {
			requireRefusedAtApply(t, closed.apply(catalogFor(tt.entry)), tt.want)
		})
	}
	_, err := closed.Store().TenantSettings(context.Background(), "b")
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "nothing of b's was stored: %v", err)

	opened := newEgressEnv(t, []string{host})
	require.NoError(t, opened.apply(catalogFor(host)))
	require.Equal(t, "Fetched 3 rows.", opened.fetch(api.URL+"/rows"))
	requireRefusedAtApply(t, opened.apply(catalogFor("127.0.0.0/8")), `egress entry "127.0.0.0/8": every address of 127.0.0.0/8 is a loopback address`)

	// Another server on loopback, which the tenant lists (stored as
	// before) but the operator did not open, is refused at the call.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `[]`)
	}))
	t.Cleanup(other.Close)
	otherHost := strings.TrimPrefix(other.URL, "http://")
	op, err := egress.OpenOperator(host, otherHost)
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
	require.NoError(t, err)
	cat, err := catalog.Parse(kinds, "b.yaml", []byte(catalogFor(host, otherHost)))
	require.NoError(t, err)
	_, err = opened.Store().ApplyCatalog(context.Background(), cat, false)
	require.NoError(t, err)
	opened.eventuallyAnswers(other.URL+"/rows",
		"address 127.0.0.1 is a loopback address (127.0.0.0/8), which the operator's egress policy does not open (AGENTFLOW_EGRESS_ALLOW)")
	require.Equal(t, "Fetched 3 rows.", opened.fetch(api.URL+"/rows"), "the opened address still works")
}
