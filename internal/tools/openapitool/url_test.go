package openapitool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/egress"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/openapitool"
)

// urlEntry is an entry whose calls name their document, from the CRM's
// host, with a profile for the CRM and one for another host.
func urlEntry(t *testing.T, crm *crmServer, extra map[string]any, approval string) agent.Tool {
	t.Helper()
	cfg := map[string]any{
		"openapi_url": map[string]any{"allowed_hosts": []string{crm.host()}, "ttl_sec": 60},
		"auth_profiles": map[string]any{
			"crm":   map[string]any{"host": crm.host(), "auth": []map[string]string{{"type": "api_key", "name": "X-Api-Key", "secret": "env:CRM_KEY"}}},
			"other": map[string]any{"host": "127.0.0.1:1", "auth": []map[string]string{{"type": "bearer", "secret": "env:CRM_KEY"}}},
		},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	spec, err := resolve(t, entry(string(raw), approval), ResolveEnv{TenantID: "demo"})
	require.NoError(t, err)
	return spec
}

// urlCaller calls a resolved entry as the runtime does, for tenant, with
// an egress client that allows every server given.
type urlCaller struct {
	t      *testing.T
	r      *tools.Registry
	spec   agent.Tool
	client *http.Client
	tenant string
}

func newURLCaller(t *testing.T, spec agent.Tool, deps Deps, servers ...*crmServer) *urlCaller {
	t.Helper()
	var hosts []string
	for _, s := range servers {
		hosts = append(hosts, s.host())
	}
	p, err := egress.ParsePolicy(hosts)
	require.NoError(t, err)
	p.Tenant = "demo"
	if deps.Secrets == nil {
		deps.Secrets = secretsOf(map[string]string{"CRM_KEY": crmKey}).Secrets
	}
	r, err := tools.NewRegistry(deps, OpenAPIAction())
	require.NoError(t, err)
	return &urlCaller{t: t, r: r, spec: spec, client: loopbackOpen(t).Client(p), tenant: "demo"}
}

func (c *urlCaller) call(args string) (Output, error) {
	return c.r.Execute(context.Background(), c.spec, Call{Args: json.RawMessage(args), TenantID: c.tenant, JobID: "job-1", CallID: "c1", HTTP: c.client})
}

// TestOpenAPIURLCalls: a call names the API's document by URL and its
// credentials by profile; a document from a host the entry does not
// allow, an unknown profile, a profile for another host and an operation
// the document lacks are refused before the API (or, for the host, the
// document's server) hears of the call.
func TestOpenAPIURLCalls(t *testing.T) {
	crm, elsewhere := startCRM(t), startCRM(t)
	spec := urlEntry(t, crm, nil, "")
	// What the model reads: how to call, from where, with what.
	require.Contains(t, spec.Description, `Name the API's OpenAPI document by its URL in each call: {"openapi_url": "https://...", "operation_id"`)
	require.Contains(t, spec.Description, "\nDocuments are read from: "+crm.host()+".")
	require.Contains(t, spec.Description, "\nauth_profile names the credentials to call with: crm (for "+crm.host()+"), other (for 127.0.0.1:1).")
	var params struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(spec.Parameters, &params))
	require.Equal(t, []string{"openapi_url", "operation_id"}, params.Required)
	require.JSONEq(t, `{"type": "string", "enum": ["crm", "other"], "description": "the named credentials to call the API with"}`, string(params.Properties["auth_profile"]))
	require.Equal(t, agent.ApprovalAlways, spec.Approval, "any method: every call waits for a person")
	_, err := BuildOpenAPI(spec, Deps{}.WithDefaults())
	require.NoError(t, err)

	c := newURLCaller(t, spec, Deps{}, crm, elsewhere)
	doc := crm.URL + "/openapi.json"
	out, err := c.call(`{"openapi_url": "` + doc + `", "operation_id": "getCustomer", "params": {"customerId": 7}, "auth_profile": "crm"}`)
	require.NoError(t, err)
	require.Equal(t, "getCustomer answered 200 OK: an object of 4 fields.", out.Text)
	require.Equal(t, crmKey, crm.lastRequest().Header.Get("X-Api-Key"), "the profile's key, to its host")
	require.Equal(t, "/v2/customers/7", crm.lastRequest().URL.Path, "the document's relative server, from its URL")
	// Another operation of the same document: narrowed out of the one
	// already fetched.
	out, err = c.call(`{"openapi_url": "` + doc + `", "operation_id": "listOrders", "params": {"customerId": 2}}`)
	require.NoError(t, err)
	require.Contains(t, out.Text, "listOrders answered 200 OK")
	require.Empty(t, crm.lastRequest().Header.Get("X-Api-Key"), "no profile, no key")
	require.EqualValues(t, 1, crm.docs.Load())
	require.EqualValues(t, 2, crm.calls.Load())

	for _, tt := range []struct{ name, args, want string }{
		{"a host the entry does not allow", `{"openapi_url": "` + elsewhere.URL + `/openapi.json?k=s3cret", "operation_id": "getCustomer", "params": {"customerId": 7}}`,
			"crm: openapi_url " + elsewhere.URL + "/openapi.json: " + elsewhere.host() + " is not a host this tool reads documents from (" + crm.host() + ")"},
		{"no document", `{"operation_id": "getCustomer", "params": {"customerId": 7}}`,
			"crm: openapi_url is required: the URL of the API's OpenAPI document, on " + crm.host()},
		{"not a URL for documents", `{"openapi_url": "file:///etc/passwd", "operation_id": "getCustomer"}`,
			`crm: openapi_url: "file:///etc/passwd": want an http or https URL`},
		{"a profile the entry lacks", `{"openapi_url": "` + doc + `", "operation_id": "getCustomer", "params": {"customerId": 7}, "auth_profile": "admin"}`,
			`crm: auth_profile "admin": this tool's profiles are crm, other`},
		{"a profile for another host", `{"openapi_url": "` + doc + `", "operation_id": "getCustomer", "params": {"customerId": 7}, "auth_profile": "other"}`,
			`crm: auth_profile "other" is for 127.0.0.1:1, and getCustomer is at ` + crm.host() + `: its credentials go nowhere else`},
		{"an operation the document lacks", `{"openapi_url": "` + doc + `", "operation_id": "deleteCustomer"}`,
			`crm: unknown operation_id "deleteCustomer"; the operations of ` + doc + ` this tool may call are searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`},
		{"a secret instead of a profile name", `{"openapi_url": "` + doc + `", "operation_id": "getCustomer", "auth_profile": {"bearer": "sk-1"}}`,
			"crm: auth_profile must be a string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.call(tt.args)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.EqualError(t, err, tt.want)
		})
	}
	require.EqualValues(t, 0, elsewhere.docs.Load()+elsewhere.calls.Load(), "nothing was asked of the host not allowed")
	require.EqualValues(t, 1, crm.docs.Load())
	require.EqualValues(t, 2, crm.calls.Load(), "no refused call reached the API")

	// A tool with a pinned document takes neither argument.
	pinned := callCRM(t, crm, `{"spec_url": "`+doc+`"}`, Deps{})
	_, err = pinned("c1", `{"openapi_url": "`+doc+`", "operation_id": "getCustomer"}`)
	require.EqualError(t, err, `crm: unknown argument "openapi_url": the arguments are operation_id, params and body`)
}

// TestOpenAPIURLPolicy: the entry's operations and methods bound what a
// document named at call time may be used for; an operation outside
// them is refused before the API hears of it, and one the entry does not
// name before the document is even fetched.
func TestOpenAPIURLPolicy(t *testing.T) {
	crm := startCRM(t)
	spec := urlEntry(t, crm, map[string]any{"operations": []string{"getCustomer", "createOrder"}, "methods": []string{"GET", "HEAD"}}, "")
	require.Equal(t, agent.ApprovalNever, spec.Approval, "reads only: no call waits")
	require.Contains(t, spec.Description, "\nOperations allowed: getCustomer, createOrder.\nMethods allowed: GET, HEAD.")
	c := newURLCaller(t, spec, Deps{}, crm)
	doc := crm.URL + "/openapi.json"

	_, err := c.call(`{"openapi_url": "` + doc + `", "operation_id": "cancelOrder", "params": {"orderId": "O-1"}}`)
	require.EqualError(t, err, `crm: operation_id "cancelOrder": this tool may call getCustomer, createOrder`)
	require.EqualValues(t, 0, crm.docs.Load(), "refused before the document is fetched")

	_, err = c.call(`{"openapi_url": "` + doc + `", "operation_id": "createOrder", "body": {"customerId": 1, "items": [{"sku": "S", "qty": 1}]}}`)
	require.EqualError(t, err, `crm: createOrder is POST /orders, and this tool may call GET, HEAD operations only`)
	require.EqualValues(t, 1, crm.docs.Load())
	require.EqualValues(t, 0, crm.calls.Load())

	_, err = c.call(`{"openapi_url": "` + doc + `", "operation_id": "getCustomer", "params": {"customerId": 1}}`)
	require.NoError(t, err)
	require.EqualValues(t, 1, crm.calls.Load())

	// A document that moved to a host the entry does not allow is not
	// followed there, though the tenant's egress allows it.
	elsewhere := startCRM(t)
	mover := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/openapi.json", http.StatusFound))
	t.Cleanup(mover.Close)
	moverHost := strings.TrimPrefix(mover.URL, "http://")
	spec = urlEntry(t, crm, map[string]any{"openapi_url": map[string]any{"allowed_hosts": []string{moverHost}}}, "")
	c = newURLCaller(t, spec, Deps{}, crm, elsewhere, &crmServer{Server: mover})
	_, err = c.call(`{"openapi_url": "` + mover.URL + `/openapi.json", "operation_id": "getCustomer", "params": {"customerId": 1}}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "crm: openapi_url "+mover.URL+"/openapi.json: a redirect to "+elsewhere.URL+"/openapi.json, which is not a host this tool reads documents from")
	require.EqualValues(t, 0, elsewhere.docs.Load())
}

// TestOpenAPIURLCache: a document is fetched once per TTL, per tenant —
// however many calls name it, one after the other or at once.
func TestOpenAPIURLCache(t *testing.T) {
	crm := startCRM(t)
	spec := urlEntry(t, crm, nil, "")
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c := newURLCaller(t, spec, Deps{Now: clock}, crm)
	get := `{"openapi_url": "` + crm.URL + `/openapi.json", "operation_id": "getCustomer", "params": {"customerId": 3}}`

	for range 5 {
		_, err := c.call(get)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, crm.docs.Load())
	advance(59 * time.Second)
	_, err := c.call(get)
	require.NoError(t, err)
	require.EqualValues(t, 1, crm.docs.Load(), "within the entry's 60 s")
	advance(time.Second)
	_, err = c.call(get)
	require.NoError(t, err)
	require.EqualValues(t, 2, crm.docs.Load(), "fetched again once the TTL is out")
	require.EqualValues(t, 7, crm.calls.Load())

	// Another tenant fetches the document through its own egress.
	c.tenant = "acme"
	_, err = c.call(get)
	require.NoError(t, err)
	require.EqualValues(t, 3, crm.docs.Load())

	// Calls at once on a cold cache wait for one fetch.
	slow := startCRM(t)
	var entered atomic.Int32
	release := make(chan struct{})
	inner := slow.Config.Handler
	slow.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi.") {
			entered.Add(1)
			<-release
		}
		inner.ServeHTTP(w, r)
	})
	c = newURLCaller(t, urlEntry(t, slow, nil, ""), Deps{}, slow)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			_, err := c.call(fmt.Sprintf(`{"openapi_url": "%s/openapi.json", "operation_id": "getCustomer", "params": {"customerId": %d}}`, slow.URL, i%5+1))
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return entered.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	for range 16 {
		require.NoError(t, <-errs)
	}
	require.EqualValues(t, 1, slow.docs.Load())
	require.EqualValues(t, 16, slow.calls.Load())
}

// TestOpenAPIURLApproval: an entry's approval policy reads openapi_url
// and auth_profile as arguments, as the runtime presents calls to it.
func TestOpenAPIURLApproval(t *testing.T) {
	crm := startCRM(t)
	const rule = `args.auth_profile == "crm" || !args.openapi_url.startsWith("https://docs.example/")`
	spec := urlEntry(t, crm, nil, rule)
	require.Equal(t, rule, spec.Approval, "the catalog's own policy is kept")
	r, err := tools.NewRegistry(Deps{}, OpenAPIAction())
	require.NoError(t, err)
	checker, err := approval.NewChecker()
	require.NoError(t, err)
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"openapi_url": "https://docs.example/crm.json", "operation_id": "getCustomer", "auth_profile": "other"}`, false},
		{`{"openapi_url": "https://docs.example/crm.json", "operation_id": "getCustomer", "auth_profile": "crm"}`, true},
		{`{"openapi_url": "https://elsewhere.example/crm.json", "operation_id": "getCustomer", "auth_profile": "other"}`, true},
		{`{"openapi_url": "https://docs.example/crm.json", "operation_id": "getCustomer"}`, true}, // no profile: the policy cannot be read, and fails safe
	} {
		p, args := r.Approval(spec, json.RawMessage(tt.args))
		got, reason := checker.NeedsApproval(p, approval.Call{Tool: spec.Name, Args: string(args), TenantID: "demo"})
		require.Equal(t, tt.want, got, "%s: %s", tt.args, reason)
	}
}

func TestOpenAPIURLConfig(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{`{"openapi_url": {"allowed_hosts": []}}`, "openapi_url.allowed_hosts: name the hosts documents may come from"},
		{`{"openapi_url": {"allowed_hosts": ["https://docs.example/"]}}`, `openapi_url.allowed_hosts[0] "https://docs.example/": write a host, not a URL`},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"], "ttl_sec": 100000}}`, "openapi_url.ttl_sec must be from 1 to 86400"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "spec_url": "https://docs.example/o.json"}`, "give the document inline (spec), by URL (spec_url), or let calls name it (openapi_url): one of them"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "server": "https://api.example"}`, "server: calls that name their document (openapi_url) go to the document's own server"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth": [{"type": "bearer", "secret": "env:K"}]}`, "auth: with openapi_url, give credentials in auth_profiles, each with the host it is for"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth_profiles": {"p": {"host": "", "auth": [{"type": "bearer", "secret": "env:K"}]}}}`, `auth_profiles.p.host: host "": empty`},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth_profiles": {"p": {"host": "https://api.example", "auth": [{"type": "bearer", "secret": "env:K"}]}}}`, "auth_profiles.p.host: host \"https://api.example\": write host or host:port, not a URL"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth_profiles": {"p": {"host": "api.example", "auth": []}}}`, "auth_profiles.p.auth: give the profile's credentials"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth_profiles": {"p": {"host": "api.example", "auth": [{"type": "bearer", "secret": "sk-live-1"}]}}}`, "auth_profiles.p.auth[0].secret: not a secret reference"},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "auth_profiles": {"a b": {"host": "api.example", "auth": [{"type": "bearer", "secret": "env:K"}]}}}`, `auth_profiles: "a b": a profile's name is letters`},
		{`{"openapi_url": {"allowed_hosts": ["docs.example"]}, "methods": ["get"]}`, `methods[0] "get": want one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE`},
	} {
		_, err := BuildOpenAPI(entry(tt.config, ""), Deps{}.WithDefaults())
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", tt.config, err)
		require.ErrorContains(t, err, "openapi_action config: "+tt.want, tt.config)
		require.NotContains(t, err.Error(), "sk-live-1")
	}

	// An entry with a pinned document and profiles: each for the API.
	s := startCRM(t)
	_, err := resolve(t, entry(`{"spec_url": "`+s.URL+`/openapi.json", "auth_profiles": {"p": {"host": "api.example", "auth": [{"type": "bearer", "secret": "env:K"}]}}}`, ""),
		ResolveEnv{TenantID: "demo", HTTP: s.client(t)})
	require.EqualError(t, err, `auth_profiles.p.host "api.example": the API is at `+s.host())
}

// TestOpenAPIPinnedProfiles: an entry with a pinned document may offer
// profiles too; a call chooses one, or none.
func TestOpenAPIPinnedProfiles(t *testing.T) {
	s := startCRM(t)
	spec, err := resolve(t, entry(`{"spec_url": "`+s.URL+`/openapi.json", "methods": ["GET"], "auth_profiles": {"reader": {"host": "`+s.host()+`", "auth": [{"type": "api_key", "name": "X-Api-Key", "secret": "env:CRM_KEY"}]}}}`, ""),
		ResolveEnv{TenantID: "demo", HTTP: s.client(t)})
	require.NoError(t, err)
	require.Contains(t, string(spec.Parameters), `"auth_profile":{"description":"the named credentials to call the API with","enum":["reader"],"type":"string"}`)
	require.Contains(t, string(spec.Parameters), `"enum":["searchCustomers","getCustomer","listOrders"]`, "GET operations only")
	require.Equal(t, agent.ApprovalNever, spec.Approval)
	c := &urlCaller{t: t, spec: spec, client: s.client(t), tenant: "demo"}
	c.r, err = tools.NewRegistry(secretsOf(map[string]string{"CRM_KEY": crmKey}), OpenAPIAction())
	require.NoError(t, err)
	_, err = c.call(`{"operation_id": "getCustomer", "params": {"customerId": 1}, "auth_profile": "reader"}`)
	require.NoError(t, err)
	require.Equal(t, crmKey, s.lastRequest().Header.Get("X-Api-Key"))
	_, err = c.call(`{"operation_id": "getCustomer", "params": {"customerId": 1}}`)
	require.NoError(t, err)
	require.Empty(t, s.lastRequest().Header.Get("X-Api-Key"))
	_, err = c.call(`{"operation_id": "createOrder", "body": {}}`)
	require.ErrorContains(t, err, `unknown operation_id "createOrder"; the operations are searchCustomers, getCustomer, listOrders`)
}
