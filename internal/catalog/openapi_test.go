package catalog

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/crm"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools"
)

// TestOpenAPIEntries: openapi_action entries of a catalog, through the
// loader and Resolve as applying a catalog runs them. An entry that leaves
// approval to the kind gets a policy over its document's operations; one
// that sets its own keeps it; a document the loader can check (inline) is
// checked with the entry's file and line.
func TestOpenAPIEntries(t *testing.T) {
	api := httptest.NewServer(crm.New())
	defer api.Close()
	host := strings.TrimPrefix(api.URL, "http://")
	op, err := egress.OpenOperator(host) // the operator opens the test's API on loopback
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
	require.NoError(t, err)

	src := `
tenant: demo
egress: ["` + host + `"]
tools:
  - name: crm
    kind: openapi_action
    config:
      spec_url: ` + api.URL + `/openapi.yaml
      auth: [{type: api_key, in: header, name: X-Api-Key, secret: "env:CRM_KEY"}]
  - name: crm_read
    kind: openapi_action
    approval: never
    config:
      spec: ` + string(crm.DocumentJSON()) + `
      server: https://crm.example/v2
      operations: [getCustomer, createOrder]
agents:
  - {id: a, model: 'openai:m', tools: [crm, crm_read]}
`
	cat, err := Parse(kinds, "t.yaml", []byte(src))
	require.NoError(t, err)
	env := func(tc agent.TenantCatalog) (tools.ResolveEnv, error) {
		p, err := egress.ParsePolicy(tc.Egress)
		if err != nil {
			return tools.ResolveEnv{}, err
		}
		p.Tenant = tc.TenantID
		return tools.ResolveEnv{TenantID: tc.TenantID, HTTP: op.Client(p)}, nil
	}
	require.NoError(t, Resolve(context.Background(), kinds, &cat, env))
	tc := cat.Tenants[0]
	require.Len(t, tc.Tools, 2)
	require.Equal(t, `has(args.operation_id) && args.operation_id in ["createOrder", "cancelOrder"]`, tc.Tools[0].Approval)
	require.Equal(t, agent.ApprovalNever, tc.Tools[1].Approval, "the entry's own policy is kept")
	require.Contains(t, tc.Tools[1].Description, "createOrder")
	require.NotContains(t, tc.Tools[1].Description, "Needs a person's approval")
	require.Len(t, tc.Agents[0].Tools, 2)
	require.Equal(t, tc.Tools[0].Config, tc.Agents[0].Tools[0].Config, "agents get the resolved entry")
	require.NotContains(t, string(tc.Tools[0].Config), "spec_url")

	// A document outside the tenant's egress allowlist is not fetched:
	// applying the catalog fails, naming the entry and the host.
	outside := strings.Replace(src, `egress: ["`+host+`"]`, `egress: ["crm.example"]`, 1)
	cat, err = Parse(kinds, "t.yaml", []byte(outside))
	require.NoError(t, err)
	err = Resolve(context.Background(), kinds, &cat, env)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, `tool "crm" (kind openapi_action): spec_url `+api.URL+`/openapi.yaml: host 127.0.0.1 is not in tenant demo's egress allowlist`)

	// Mistakes in an entry are reported with its place in the file.
	for _, tt := range []struct{ name, config, want string }{
		{"no document", `{server: "https://x.example"}`, "t.yaml:5: tools[0].config: openapi_action config: give the document inline (spec), by URL (spec_url), or let calls name it (openapi_url): one of them"},
		{"a bad inline document", `{spec: {openapi: 3.0.3, info: {title: x, version: "1"}, paths: {/a: {get: {}}}}, server: "https://x.example"}`,
			"t.yaml:5: tools[0].config: openapi_action config: spec: the OpenAPI document is not valid"},
		{"a secret pasted in", `{spec_url: "https://x.example/o.json", auth: [{type: bearer, secret: "sk-123"}]}`,
			"t.yaml:5: tools[0].config: openapi_action config: auth[0].secret: not a secret reference"},
		{"a URL where a document host goes", `{openapi_url: {allowed_hosts: ["https://docs.example/"]}}`,
			`t.yaml:5: tools[0].config: openapi_action config: openapi_url.allowed_hosts[0] "https://docs.example/": write a host, not a URL`},
		{"a profile without its host", `{openapi_url: {allowed_hosts: [docs.example]}, auth_profiles: {gh: {auth: [{type: bearer, secret: "env:GH"}]}}}`,
			`t.yaml:5: tools[0].config: openapi_action config: auth_profiles.gh.host: host "": empty: write host or host:port`},
		{"a secret pasted into a profile", `{openapi_url: {allowed_hosts: [docs.example]}, auth_profiles: {gh: {host: api.github.com, auth: [{type: bearer, secret: "sk-123"}]}}}`,
			"t.yaml:5: tools[0].config: openapi_action config: auth_profiles.gh.auth[0].secret: not a secret reference"},
		{"a TTL of the wrong type", `{openapi_url: {allowed_hosts: [docs.example], ttl_sec: "5m"}}`,
			"t.yaml:5: tools[0].config: openapi_action config: json: cannot unmarshal string into Go struct field urlDocuments.openapi_url.ttl_sec of type int"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(kinds, "t.yaml", []byte("tenant: demo\ntools:\n  - name: crm\n    kind: openapi_action\n    config: "+tt.config+"\n"))
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "sk-123")
		})
	}
}

// TestOpenAPIProfileSecrets: the secrets an entry's auth profiles name are
// the operator's to grant, as every secret a catalog names.
func TestOpenAPIProfileSecrets(t *testing.T) {
	grants, err := secrets.ParseGrants("demo=env:GH_*")
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{SecretGrants: &grants}, tools.Builtin()...)
	require.NoError(t, err)
	src := "tenant: demo\ntools:\n  - name: any_api\n    kind: openapi_action\n    config:\n" +
		"      openapi_url: {allowed_hosts: [api.github.com]}\n" +
		"      auth_profiles: {gh: {host: api.github.com, auth: [{type: bearer, secret: \"env:GH_TOKEN\"}]}, crm: {host: crm.example, auth: [{type: bearer, secret: \"env:CRM_TOKEN\"}]}}\n"
	_, err = Parse(kinds, "t.yaml", []byte(src))
	require.EqualError(t, err, `t.yaml:6: tools[0].config: secret env:CRM_TOKEN is not one tenant "demo" may name: the operator grants secrets to tenants with AGENTFLOW_SECRETS`)
	_, err = Parse(kinds, "t.yaml", []byte(strings.Replace(src, "env:CRM_TOKEN", "env:GH_CRM", 1)))
	require.NoError(t, err)
}

// TestReadmeOpenAPICatalogs: the catalogs of docs/guides/openapi.md load
// (but those whose elisions, "…", stand for more).
func TestReadmeOpenAPICatalogs(t *testing.T) {
	section, err := docs.Section("guides/openapi.md", "OpenAPI actions")
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	loaded := 0
	for _, block := range docs.Blocks(section, "yaml") {
		if strings.Contains(block, "…") {
			continue
		}
		_, err := Parse(kinds, "openapi.md", []byte(block))
		require.NoError(t, err, block)
		loaded++
	}
	require.GreaterOrEqual(t, loaded, 2)
}
