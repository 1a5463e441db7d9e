package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	policy "github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/crm"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
)

// promotions records the composites that pipeline runs would be promoted
// into: the spec execute_pipeline hands over is what the store keeps.
type promotions struct{ specs []agent.Tool }

func (p *promotions) RecordPipelineRun(_ context.Context, _, _, _, _ string, composite agent.Tool) (string, error) {
	p.specs = append(p.specs, composite)
	return composite.Name, nil
}

// approvalCase is a call of a tool, and whether it must wait for a person.
type approvalCase struct {
	tool string
	args string
	want bool
}

// TestApprovalFollowsTheEffect walks every way a tool comes to exist — a
// catalog entry, a toolkit, an MCP server's listing, an API's operations,
// a declared composite, a composite promoted from pipeline runs — and
// checks each call's approval as CallModel decides it
// (tools.Registry.Approval, then the policy): no path lets a call that
// changes something elsewhere run without a person, unless the catalog
// says so of the entry itself.
func TestApprovalFollowsTheEffect(t *testing.T) {
	ctx := context.Background()
	rec := &promotions{}
	op, err := egress.OpenOperator("127.0.0.0/8") // the operator opens the test's servers on loopback
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Composites: rec, Egress: op}, tools.Builtin()...)
	require.NoError(t, err)
	checker, err := policy.NewChecker()
	require.NoError(t, err)
	mcpSrv := mcptest.StartHTTP(t, mcptest.Options{})
	crmSrv := httptest.NewServer(crm.New())
	t.Cleanup(crmSrv.Close)
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"method":%q,"item":%q}]`, r.Method, r.URL.Query().Get("item"))
	}))
	t.Cleanup(orders.Close)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	pipe := func(method string) string {
		return `{"session_id":"s","pipeline":[{"step":"http_request","method":"` + method + `","url":"` + orders.URL + `/orders","params":{"item":"apple"}}]}`
	}

	src := `
tenant: demo
egress: ["` + host(mcpSrv.Addr) + `", "` + host(crmSrv.URL) + `", "` + host(orders.URL) + `"]
tools:
  - {name: pipe, kind: execute_pipeline, config: {cache_ttl_sec: 0}}
  - {name: pipe_always, kind: execute_pipeline, approval: always, config: {cache_ttl_sec: 0}}
  - name: pipe_gold
    kind: execute_pipeline
    approval: 'args.pipeline.exists(s, has(s.params) && s.params.item == "gold")'
    config: {cache_ttl_sec: 0}
  - {name: gh, kind: mcp, config: {url: "` + mcpSrv.URL + `"}}
  - {name: gh_open, kind: mcp, approval: never, config: {url: "` + mcpSrv.URL + `", tools: [search]}}
  - {name: crm, kind: openapi_action, config: {spec_url: "` + crmSrv.URL + `/openapi.yaml"}}
  - {name: crm_always, kind: openapi_action, approval: always, config: {spec_url: "` + crmSrv.URL + `/openapi.yaml"}}
  - name: order_post
    kind: composite_pipeline
    config: {pipeline: ` + pipe("POST") + `}
  - name: order_post_never
    kind: composite_pipeline
    approval: never
    config: {pipeline: ` + pipe("POST") + `}
  - name: order_get
    kind: composite_pipeline
    config: {pipeline: ` + pipe("GET") + `}
toolkits:
  - {name: kit, tools: [pipe]}
agents:
  - {id: a, model: 'openai:m', tools: [kit, pipe_always, pipe_gold, gh, gh_open, crm, crm_always, order_post, order_post_never, order_get]}
`
	cat, err := Parse(kinds, "t.yaml", []byte(src))
	require.NoError(t, err)
	p, err := egress.ParsePolicy(cat.Tenants[0].Egress)
	require.NoError(t, err)
	client := op.Client(p)
	require.NoError(t, Resolve(ctx, kinds, &cat, func(tc agent.TenantCatalog) (tools.ResolveEnv, error) {
		return tools.ResolveEnv{TenantID: tc.TenantID, HTTP: client}, nil
	}))
	ag := cat.Tenants[0].Agents[0]

	// The composites that runs of each pipeline tool promote: a POST run
	// of the default policy, a GET run, a run of a tool that always asks,
	// and one of a tool whose policy looks at the pipeline's parameters.
	promote := func(tool, method string) agent.Tool {
		t.Helper()
		spec, ok := ag.Tool(tool)
		require.True(t, ok, tool)
		rec.specs = nil
		_, err := kinds.Execute(ctx, spec, tools.Call{Args: json.RawMessage(pipe(method)), TenantID: "demo", JobID: "j", CallID: "c", HTTP: client})
		require.NoError(t, err)
		require.Len(t, rec.specs, 1, "the run was recorded for promotion")
		promoted := rec.specs[0]
		promoted.Name = tool + "_" + strings.ToLower(method) + "_promoted"
		return promoted
	}
	ag.Tools = append(ag.Tools, promote("pipe", "POST"), promote("pipe", "GET"), promote("pipe_always", "GET"), promote("pipe_gold", "GET"))

	for _, tt := range []approvalCase{
		// catalog and toolkit: the kind's default, a POST waits
		{"pipe", pipe("POST"), true},
		{"pipe", pipe("GET"), false},
		{"pipe_always", pipe("GET"), true},
		// MCP listing: the entry's policy (the kind's: always), or the
		// catalog's explicit never
		{"gh_search", `{"query":"x"}`, true},
		{"gh_get_issue", `{"number":1}`, true},
		{"gh_open_search", `{"query":"x"}`, false},
		// API operations: the document's rule, or the entry's stricter one
		{"crm", `{"operation_id":"createOrder"}`, true},
		{"crm", `{"operation_id":"getCustomer"}`, false},
		{"crm_always", `{"operation_id":"getCustomer"}`, true},
		// declared composites: as the pipeline they run, never below the
		// POST rule, whatever the entry says
		{"order_post", `{"item":"pear"}`, true},
		{"order_post_never", `{"item":"pear"}`, true},
		{"order_get", `{"item":"pear"}`, false},
		// promoted composites: the policy of the tool that ran them
		{"pipe_post_promoted", `{"item":"pear"}`, true},
		{"pipe_get_promoted", `{"item":"pear"}`, false},
		{"pipe_always_get_promoted", `{"item":"pear"}`, true},
		{"pipe_gold_get_promoted", `{"item":"gold"}`, true},
		{"pipe_gold_get_promoted", `{"item":"tin"}`, false},
	} {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			spec, ok := ag.Tool(tt.tool)
			require.True(t, ok, "agent has %s", tt.tool)
			pol, args := kinds.Approval(spec, json.RawMessage(tt.args))
			need, why := checker.NeedsApproval(pol, policy.Call{Tool: tt.tool, Args: string(args), TenantID: "demo"})
			require.Equal(t, tt.want, need, "policy %q over %s: %s", pol, args, why)
		})
	}

	// A derived tool never goes below its entry: a listing that proposed
	// never for a tool of an entry that asks always keeps always.
	mcpKind, _ := kinds.Kind("mcp")
	require.Equal(t, agent.ApprovalAlways, tools.DerivedApproval(mcpKind, agent.ApprovalAlways, agent.ApprovalNever))
	require.Equal(t, `(args.x > 1
) || (args.y > 1
)`, tools.DerivedApproval(mcpKind, "args.x > 1", "args.y > 1"))
}
