package openapitool_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	"github.com/agentflow/agentflow/internal/crm"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/openapitool"
)

// crmKey is the API key the test CRM wants, the value of env:CRM_KEY.
const crmKey = "crm-key-5f1e2d3c"

// crmServer is the sample CRM (internal/crm) on a local port, which keeps
// the requests its API was sent and, by the X-Request-Id a call sends,
// fails, stalls, echoes what it was sent or redirects.
type crmServer struct {
	*httptest.Server
	api   *crm.API
	calls atomic.Int32 // requests to the API (not to its document)
	docs  atomic.Int32 // requests of its document
	mu    sync.Mutex
	last  *http.Request
	body  []byte // last's
}

func startCRM(t *testing.T) *crmServer {
	t.Helper()
	s := &crmServer{api: crm.New()}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v2/") {
			s.docs.Add(1)
			s.api.ServeHTTP(w, r)
			return
		}
		s.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.last, s.body = r.Clone(context.Background()), body
		s.mu.Unlock()
		switch r.Header.Get("X-Request-Id") {
		case "fail":
			http.Error(w, "the database is down", http.StatusServiceUnavailable)
			return
		case "slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			return
		case "echo":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error": "key %s is not valid"}`, r.Header.Get("X-Api-Key"))
			return
		case "redirect":
			http.Redirect(w, r, "http://elsewhere.example/steal", http.StatusFound)
			return
		}
		s.api.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *crmServer) host() string { return strings.TrimPrefix(s.URL, "http://") }

// lastRequest is the last request the API was sent.
func (s *crmServer) lastRequest() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// client is the tenant's egress client, allowing the CRM's host:port.
func (s *crmServer) client(t *testing.T) *http.Client {
	t.Helper()
	p, err := egress.ParsePolicy([]string{s.host()})
	require.NoError(t, err)
	p.Tenant = "demo"
	return loopbackOpen(t).Client(p)
}

// entry is a catalog entry of the kind as the loader makes it: what the
// entry leaves out comes from the kind.
func entry(config, approval string) agent.Tool {
	if approval == "" {
		approval = OpenAPIApproval
	}
	return agent.Tool{Name: "crm", Kind: "openapi_action", Description: OpenAPIDescription,
		Parameters: json.RawMessage(OpenAPIParameters), Approval: approval, Config: json.RawMessage(config)}
}

// resolve checks an entry as the loader does, then resolves it as
// applying the catalog does.
func resolve(t *testing.T, spec agent.Tool, env ResolveEnv) (agent.Tool, error) {
	t.Helper()
	if _, err := BuildOpenAPI(spec, Deps{}.WithDefaults()); err != nil {
		return agent.Tool{}, err
	}
	got, err := OpenAPIAction().Resolve(context.Background(), spec, env)
	if err != nil {
		return agent.Tool{}, err
	}
	require.Len(t, got, 1)
	return got[0], nil
}

func secretsOf(env map[string]string) Deps {
	return Deps{Secrets: secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}
}

func TestOpenAPIActionResolve(t *testing.T) {
	s := startCRM(t)
	env := ResolveEnv{TenantID: "demo", HTTP: s.client(t)}

	spec, err := resolve(t, entry(`{"spec_url": "`+s.URL+`/openapi.json"}`, ""), env)
	require.NoError(t, err)
	// The document is pinned in the config, with the server it gives
	// resolved against the URL it came from.
	var cfg OpenAPIConfig
	require.NoError(t, json.Unmarshal(spec.Config, &cfg))
	require.Empty(t, cfg.SpecURL)
	require.Equal(t, s.URL+"/v2", cfg.Server)
	require.Contains(t, string(cfg.Spec), `"operationId":"createOrder"`)
	_, err = BuildOpenAPI(spec, Deps{}.WithDefaults())
	require.NoError(t, err, "the resolved entry builds without I/O")
	// The model reads the operations; calls that change something wait
	// for a person.
	require.True(t, strings.HasPrefix(spec.Description, "CRM. Call one operation per call"), spec.Description)
	require.Contains(t, spec.Description, "\n- getCustomer: GET /customers/{customerId}. Get a customer by id. Params: customerId (path, integer, required)")
	require.Contains(t, spec.Description, "\n- cancelOrder: DELETE /orders/{orderId}. Cancel an open order. Params: orderId (path, string, required). Needs a person's approval.")
	require.Equal(t, `has(args.operation_id) && args.operation_id in ["createOrder", "cancelOrder"]`, spec.Approval)
	require.Contains(t, string(spec.Parameters), `"enum":["searchCustomers","getCustomer","listOrders","createOrder","cancelOrder"]`)

	// The entry's own description, approval and operations are kept.
	narrowed := entry(`{"spec_url": "`+s.URL+`/openapi.yaml", "operations": ["getCustomer", "listOrders"], "server": "`+s.URL+`/v2"}`, agent.ApprovalAlways)
	narrowed.Description = "Our customers"
	spec, err = resolve(t, narrowed, env)
	require.NoError(t, err)
	require.Equal(t, agent.ApprovalAlways, spec.Approval)
	require.True(t, strings.HasPrefix(spec.Description, "Our customers. Call one operation"), spec.Description)
	require.NotContains(t, spec.Description, "createOrder")
	require.NotContains(t, spec.Description, "Needs a person's approval")
	require.NoError(t, json.Unmarshal(spec.Config, &cfg))
	require.NotContains(t, string(cfg.Spec), "createOrder", "only the granted operations are pinned")

	// Only reads: no call needs approval.
	spec, err = resolve(t, entry(`{"spec_url": "`+s.URL+`/openapi.json", "operations": ["getCustomer"]}`, ""), env)
	require.NoError(t, err)
	require.Equal(t, agent.ApprovalNever, spec.Approval)

	// An inline document (as YAML gives it: `openapi: 3.0` is a number)
	// needs a server when its own is relative.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(crm.DocumentJSON(), &doc))
	doc["openapi"] = 3.0
	inline, err := json.Marshal(map[string]any{"spec": doc, "server": s.URL + "/v2"})
	require.NoError(t, err)
	spec, err = resolve(t, entry(string(inline), ""), ResolveEnv{TenantID: "demo"})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(spec.Config, &cfg))
	require.Equal(t, s.URL+"/v2", cfg.Server)
}

func TestOpenAPIActionResolveErrors(t *testing.T) {
	s := startCRM(t)
	down, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	downURL := "http://" + down.Addr().String()
	require.NoError(t, down.Close())
	p, err := egress.ParsePolicy([]string{s.host(), strings.TrimPrefix(downURL, "http://")})
	require.NoError(t, err)
	p.Tenant = "demo"
	env := ResolveEnv{TenantID: "demo", HTTP: loopbackOpen(t).Client(p)}

	for _, tt := range []struct {
		name, config string
		code         agent.Code
		want         string
	}{
		{"a URL outside the egress allowlist", `{"spec_url": "http://127.0.0.2:9/openapi.json?token=t0p"}`, agent.CodeInvalid,
			"spec_url http://127.0.0.2:9/openapi.json: host 127.0.0.2 is not in tenant demo's egress allowlist"},
		{"a metadata address", `{"spec_url": "http://169.254.169.254/latest/openapi.json"}`, agent.CodeInvalid,
			"is not in tenant demo's egress allowlist"},
		{"no such document", `{"spec_url": "` + s.URL + `/nope.json"}`, agent.CodeInvalid,
			"spec_url " + s.URL + "/nope.json answered 404 Not Found"},
		{"not a document", `{"spec_url": "` + s.URL + `/v2/customers/1"}`, agent.CodeInvalid,
			"spec_url " + s.URL + "/v2/customers/1: not an OpenAPI document: it has no openapi field"},
		{"the server is down", `{"spec_url": "` + downURL + `/openapi.json"}`, agent.CodeUnavailable,
			"spec_url " + downURL + "/openapi.json: "},
		{"an operation the document lacks", `{"spec_url": "` + s.URL + `/openapi.json", "operations": ["getCustomer", "wipeAll"]}`, agent.CodeInvalid,
			`operations "wipeAll": the document has no such operation; it has searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`},
		{"an inline document with a relative server", `{"spec": ` + string(crm.DocumentJSON()) + `}`, agent.CodeInvalid,
			`the document's server "/v2" is relative and the document was given inline: set server`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(t, entry(tt.config, ""), env)
			require.True(t, agent.IsCode(err, tt.code), "%v", err)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "t0p")
		})
	}

	// Allowed to be unreachable, an entry whose document cannot be fetched
	// stands for no tools for now.
	got, err := OpenAPIAction().Resolve(context.Background(), entry(`{"spec_url": "`+downURL+`/openapi.json"}`, ""),
		ResolveEnv{TenantID: "demo", HTTP: env.HTTP, AllowUnreachable: true})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestOpenAPIActionConfig(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{`{}`, "give the document inline (spec), by URL (spec_url), or let calls name it (openapi_url): one of them"},
		{`{"spec": {"openapi": "3.0.3"}, "spec_url": "https://a.example/o.json"}`, "one of them"},
		{`{"spec_url": "ftp://a.example/o.json"}`, `spec_url: "ftp://a.example/o.json": want an http or https URL`},
		{`{"spec_url": "https://u:p@a.example/o.json"}`, "must not carry credentials"},
		{`{"spec_url": "https://a.example/o.json", "server": "/v2"}`, "server"},
		{`{"spec_url": "https://a.example/o.json", "timeout_sec": 60}`, "timeout_sec must be from 1 to 30"},
		{`{"spec_url": "https://a.example/o.json", "max_response_bytes": 1073741824}`, "max_response_bytes must be from 1 to 10485760"},
		{`{"spec_url": "https://a.example/o.json", "auth": [{"type": "api_key", "secret": "env:K"}]}`, "auth[0]: an api_key needs the name"},
		{`{"spec_url": "https://a.example/o.json", "auth": [{"type": "api_key", "in": "body", "name": "k", "secret": "env:K"}]}`, `auth[0].in "body"`},
		{`{"spec_url": "https://a.example/o.json", "auth": [{"type": "oauth", "secret": "env:K"}]}`, `auth[0].type "oauth": want api_key, bearer or basic`},
		{`{"spec_url": "https://a.example/o.json", "auth": [{"type": "bearer", "secret": "sk-live-123"}]}`, "auth[0].secret: not a secret reference (not shown"},
		{`{"spec_url": "https://a.example/o.json", "auth": [{"type": "bearer", "name": "X", "secret": "env:K"}]}`, "leave out in and name"},
		{`{"spec_url": "https://a.example/o.json", "headers": {}}`, `unknown field "headers"`},
		{`{"spec": {"openapi": "3.0.3", "paths": {}}}`, "openapi_action config: spec: the OpenAPI document is not valid"},
		{`{"spec": ` + string(crm.DocumentJSON()) + `, "server": "https://crm.example", "operations": ["nope"]}`, `operations "nope": the document has no such operation`},
	} {
		_, err := BuildOpenAPI(entry(tt.config, ""), Deps{}.WithDefaults())
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", tt.config, err)
		require.ErrorContains(t, err, tt.want, tt.config)
		require.NotContains(t, err.Error(), "sk-live-123")
	}
}

// callCRM resolves an entry for the CRM and returns a function that calls
// it as the runtime does.
func callCRM(t *testing.T, s *crmServer, config string, deps Deps) func(callID, args string) (Output, error) {
	t.Helper()
	spec, err := resolve(t, entry(config, ""), ResolveEnv{TenantID: "demo", HTTP: s.client(t)})
	require.NoError(t, err)
	r, err := tools.NewRegistry(deps, OpenAPIAction())
	require.NoError(t, err)
	client := s.client(t)
	return func(callID, args string) (Output, error) {
		return r.Execute(context.Background(), spec, Call{Args: json.RawMessage(args), TenantID: "demo", JobID: "job-1", CallID: callID, HTTP: client})
	}
}

func TestOpenAPIActionCalls(t *testing.T) {
	s := startCRM(t)
	call := callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json", "auth": [{"type": "api_key", "in": "header", "name": "X-Api-Key", "secret": "env:CRM_KEY"}]}`,
		secretsOf(map[string]string{"CRM_KEY": crmKey}))
	require.EqualValues(t, 1, s.docs.Load(), "resolving fetched the document")
	// Calls use the document pinned when the catalog was applied.
	defer func() { require.EqualValues(t, 1, s.docs.Load(), "calls do not fetch the document") }()

	// A valid call: the answer, checked, as data.
	out, err := call("c1", `{"operation_id": "getCustomer", "params": {"customerId": 7}}`)
	require.NoError(t, err)
	want, _ := crm.CustomerByID(7)
	wantJSON, _ := json.Marshal(want)
	require.JSONEq(t, string(wantJSON), string(out.Data))
	require.Equal(t, "getCustomer answered 200 OK: an object of 4 fields.", out.Text)
	require.True(t, out.ShowData)
	require.Equal(t, crmKey, s.lastRequest().Header.Get("X-Api-Key"))
	require.Empty(t, s.lastRequest().Header.Get("Idempotency-Key"), "a read needs no idempotency key")

	out, err = call("c2", `{"operation_id": "searchCustomers", "params": {"q": "a", "limit": 3}}`)
	require.NoError(t, err)
	require.Equal(t, "searchCustomers answered 200 OK: 3 items in a list.", out.Text)
	require.Equal(t, "limit=3&q=a", s.lastRequest().URL.RawQuery)

	// Calls the document refuses are refused before anything is sent,
	// with what to fix.
	before := s.calls.Load()
	for _, tt := range []struct{ args, want string }{
		{`{"operation_id": "deleteCustomer", "params": {"customerId": 7}}`,
			`crm: unknown operation_id "deleteCustomer"; the operations are searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`},
		{`{"operation_id": "searchCustomers", "params": {"tier": "pro"}}`, `crm: searchCustomers: parameter "q" (query) is required`},
		{`{"operation_id": "getCustomer", "params": {"customerId": "seven"}}`, `crm: getCustomer: parameter "customerId" (path): an invalid integer`},
		{`{"operation_id": "createOrder", "body": {"customerId": 7, "items": []}}`, `crm: createOrder: body.items: minimum number of items is 1`},
		{`"getCustomer"`, `crm: arguments must be a JSON object, not "getCustomer"`},
	} {
		_, err := call("c3", tt.args)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", tt.args, err)
		require.EqualError(t, err, tt.want, tt.args)
	}
	require.Equal(t, before, s.calls.Load(), "nothing was sent")

	// An answer outside the document is passed on, with a note.
	out, err = call("c4", `{"operation_id": "getCustomer", "params": {"customerId": 13}}`)
	require.NoError(t, err)
	require.Contains(t, string(out.Data), `"tier":"legacy"`)
	require.Equal(t, `getCustomer answered 200 OK: an object of 4 fields.`+"\n"+
		`Note: the answer does not match the API's document: response body.tier: value is not one of the allowed values ["free","pro","enterprise"]`, out.Text)

	// 4xx: the model reads what the API said; 5xx: worth a retry.
	_, err = call("c5", `{"operation_id": "getCustomer", "params": {"customerId": 99}}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, `crm: getCustomer answered 404 Not Found: {"error":"no customer 99"}`)
	_, err = call("c6", `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "fail"}}`)
	require.True(t, agent.IsCode(err, agent.CodeUnavailable), "%v", err)
	require.EqualError(t, err, "crm: listOrders answered 503 Service Unavailable: the database is down")
	// A redirect elsewhere is not followed: the key would go with it.
	_, err = call("c7", `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "redirect"}}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, "crm: listOrders answered 302 Found, a redirect to http://elsewhere.example/steal, which the tool does not follow to another host")
	// A key the API echoes back is not shown.
	_, err = call("c8", `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "echo"}}`)
	require.EqualError(t, err, `crm: listOrders answered 401 Unauthorized: {"error": "key [secret env:CRM_KEY] is not valid"}`)

	// A call that changes something carries a key of its own, the same
	// on every attempt of the call.
	out, err = call("c9", `{"operation_id": "createOrder", "body": {"customerId": 7, "items": [{"sku": "SKU-3", "qty": 2}]}}`)
	require.NoError(t, err)
	require.Equal(t, "createOrder answered 201 Created: an object of 4 fields.", out.Text)
	var order crm.Order
	require.NoError(t, json.Unmarshal(out.Data, &order))
	require.Equal(t, crm.Order{ID: order.ID, CustomerID: 7, Status: "open", Items: []crm.Item{{SKU: "SKU-3", Qty: 2}}}, order)
	key := s.lastRequest().Header.Get("Idempotency-Key")
	require.Len(t, key, 32)
	s.mu.Lock()
	body := s.body
	s.mu.Unlock()
	require.JSONEq(t, `{"customerId": 7, "items": [{"sku": "SKU-3", "qty": 2}]}`, string(body))
	// Another attempt of the call (Temporal retries an activity) places
	// no second order with an API that honours the key.
	out, err = call("c9", `{"operation_id": "createOrder", "body": {"customerId": 7, "items": [{"sku": "SKU-3", "qty": 2}]}}`)
	require.NoError(t, err)
	require.Equal(t, key, s.lastRequest().Header.Get("Idempotency-Key"))
	require.Contains(t, string(out.Data), `"id":"`+order.ID+`"`)
	require.Len(t, s.api.Orders(), 2*crm.Customers+1)

	out, err = call("c10", `{"operation_id": "cancelOrder", "params": {"orderId": "`+order.ID+`"}}`)
	require.NoError(t, err)
	require.Equal(t, "cancelOrder answered 204 No Content.", out.Text)
	require.Nil(t, out.Data)
	require.NotEqual(t, key, s.lastRequest().Header.Get("Idempotency-Key"))
	_, err = call("c11", `{"operation_id": "cancelOrder", "params": {"orderId": "`+order.ID+`"}}`)
	require.EqualError(t, err, `crm: cancelOrder answered 409 Conflict: {"error":"order `+order.ID+` is cancelled, not open"}`)
}

// TestOpenAPIActionInline: an entry with the document inline calls the
// API at the server it names, without fetching anything but the call.
func TestOpenAPIActionInline(t *testing.T) {
	s := startCRM(t)
	inline, err := json.Marshal(map[string]any{"spec": json.RawMessage(crm.DocumentJSON()), "server": s.URL + "/v2", "operations": []string{"getCustomer"}})
	require.NoError(t, err)
	call := callCRM(t, s, string(inline), Deps{})
	out, err := call("c1", `{"operation_id": "getCustomer", "params": {"customerId": 3}}`)
	require.NoError(t, err)
	want, _ := crm.CustomerByID(3)
	wantJSON, _ := json.Marshal(want)
	require.JSONEq(t, string(wantJSON), string(out.Data))
	require.Equal(t, "/v2/customers/3", s.lastRequest().URL.Path)
	require.EqualValues(t, 0, s.docs.Load())

	// Operations outside the entry's allowlist are not callable, though
	// the document has them.
	before := s.calls.Load()
	_, err = call("c2", `{"operation_id": "createOrder", "body": {"customerId": 3, "items": [{"sku": "SKU-1", "qty": 1}]}}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, `crm: unknown operation_id "createOrder"; the operations are getCustomer`)
	require.Equal(t, before, s.calls.Load())
}

func TestOpenAPIActionConcurrentCalls(t *testing.T) {
	s := startCRM(t)
	call := callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json"}`, Deps{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			out, err := call(fmt.Sprint("c", i), fmt.Sprintf(`{"operation_id": "getCustomer", "params": {"customerId": %d, "expand": ["orders"]}}`, i%crm.Customers+1))
			if err == nil && !strings.Contains(string(out.Data), `"orders":[`) {
				err = fmt.Errorf("call %d: no orders in %s", i, out.Data)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestOpenAPIActionLimits(t *testing.T) {
	s := startCRM(t)
	call := callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json", "timeout_sec": 1, "max_response_bytes": 300}`, Deps{})

	start := time.Now()
	_, err := call("c1", `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "slow"}}`)
	require.True(t, agent.IsCode(err, agent.CodeUnavailable), "%v", err)
	require.EqualError(t, err, "crm: listOrders: GET "+s.URL+"/v2/customers/1/orders: no answer in time")
	require.Less(t, time.Since(start), 2500*time.Millisecond)

	_, err = call("c2", `{"operation_id": "searchCustomers", "params": {"q": "a", "limit": 20}}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, "crm: searchCustomers: the answer is larger than 300 bytes (max_response_bytes): ask for less, with a filter or a page")
}

func TestOpenAPIActionAuth(t *testing.T) {
	s := startCRM(t)
	env := map[string]string{"CRM_KEY": crmKey, "CRM_TOKEN": "tok-9a8b7c", "CRM_LOGIN": "ada:lovelace"}
	for _, tt := range []struct {
		name, auth string
		check      func(t *testing.T, r *http.Request)
	}{
		{"api key in a header", `{"type": "api_key", "in": "header", "name": "X-Api-Key", "secret": "env:CRM_KEY"}`, func(t *testing.T, r *http.Request) {
			require.Equal(t, crmKey, r.Header.Get("X-Api-Key"))
		}},
		{"api key in the query", `{"type": "api_key", "in": "query", "name": "api_key", "secret": "env:CRM_KEY"}`, func(t *testing.T, r *http.Request) {
			require.Equal(t, crmKey, r.URL.Query().Get("api_key"))
			require.Equal(t, "orders", r.URL.Query().Get("expand"), "the call's own query is kept")
		}},
		{"api key in a cookie", `{"type": "api_key", "in": "cookie", "name": "sid", "secret": "env:CRM_KEY"}`, func(t *testing.T, r *http.Request) {
			c, err := r.Cookie("sid")
			require.NoError(t, err)
			require.Equal(t, crmKey, c.Value)
		}},
		{"bearer", `{"type": "bearer", "secret": "env:CRM_TOKEN"}`, func(t *testing.T, r *http.Request) {
			require.Equal(t, "Bearer tok-9a8b7c", r.Header.Get("Authorization"))
		}},
		{"basic", `{"type": "basic", "secret": "env:CRM_LOGIN"}`, func(t *testing.T, r *http.Request) {
			require.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("ada:lovelace")), r.Header.Get("Authorization"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			call := callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json", "auth": [`+tt.auth+`]}`, secretsOf(env))
			_, err := call("c1", `{"operation_id": "getCustomer", "params": {"customerId": 2, "expand": ["orders"]}}`)
			require.NoError(t, err)
			tt.check(t, s.lastRequest())
		})
	}

	// An unset secret fails the call, naming the reference; nothing is sent.
	call := callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json", "auth": [{"type": "bearer", "secret": "env:CRM_UNSET"}]}`, secretsOf(env))
	before := s.calls.Load()
	_, err := call("c1", `{"operation_id": "getCustomer", "params": {"customerId": 2}}`)
	require.ErrorContains(t, err, "env:CRM_UNSET")
	require.ErrorIs(t, err, secrets.ErrNotSet)
	require.Equal(t, before, s.calls.Load())

	// The key in the query is not shown when the call fails.
	call = callCRM(t, s, `{"spec_url": "`+s.URL+`/openapi.json", "timeout_sec": 1, "auth": [{"type": "api_key", "in": "query", "name": "api_key", "secret": "env:CRM_KEY"}]}`, secretsOf(env))
	_, err = call("c1", `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "slow"}}`)
	require.Error(t, err)
	require.NotContains(t, err.Error(), crmKey)
}

// TestOpenAPIActionApproval: with the kind's policy, calls of operations
// other than GET and HEAD wait for a person, as the policy checker reads
// the calls; a call reads its operation id as the policy does, so that
// arguments cannot slip an operation past it.
func TestOpenAPIActionApproval(t *testing.T) {
	s := startCRM(t)
	spec, err := resolve(t, entry(`{"spec_url": "`+s.URL+`/openapi.json"}`, ""), ResolveEnv{TenantID: "demo", HTTP: s.client(t)})
	require.NoError(t, err)
	checker, err := approval.NewChecker()
	require.NoError(t, err)
	require.NoError(t, checker.Compile(spec.Approval))
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"operation_id": "getCustomer", "params": {"customerId": 1}}`, false},
		{`{"operation_id": "searchCustomers", "params": {"q": "a"}}`, false},
		{`{"operation_id": "createOrder", "body": {}}`, true},
		{`{"operation_id": "cancelOrder", "params": {"orderId": "O-1"}}`, true},
		{`{"operation_id": "getCustomer", "operation_id": "cancelOrder", "params": {"orderId": "O-1"}}`, true},
		{`{"operation_id": "nope"}`, false}, // refused when it runs
	} {
		got, reason := checker.NeedsApproval(spec.Approval, approval.Call{Tool: "crm", Args: tt.args, TenantID: "demo"})
		require.Equal(t, tt.want, got, "%s: %s", tt.args, reason)
	}

	// Before it is resolved, the kind's policy asks for approval of every
	// call: safe if an entry ever ran unresolved.
	got, _ := checker.NeedsApproval(OpenAPIApproval, approval.Call{Tool: "crm", Args: `{"operation_id": "getCustomer"}`})
	require.True(t, got)
}

// crmSwagger2 is the CRM's getCustomer as a Swagger 2.0 document.
const crmSwagger2 = `{"swagger": "2.0", "info": {"title": "CRM", "version": "2"}, "basePath": "/v2",
  "paths": {"/customers/{customerId}": {"get": {"operationId": "getCustomer", "produces": ["application/json"],
    "parameters": [{"name": "customerId", "in": "path", "required": true, "type": "integer"}],
    "responses": {"200": {"description": "the customer", "schema": {"type": "object"}}}}}}}`

// TestOpenAPIActionSwagger2: an entry whose inline document is Swagger
// 2.0 calls the API as one with its OpenAPI 3 conversion would.
func TestOpenAPIActionSwagger2(t *testing.T) {
	s := startCRM(t)
	inline, err := json.Marshal(map[string]any{"spec": json.RawMessage(crmSwagger2), "server": s.URL + "/v2"})
	require.NoError(t, err)
	call := callCRM(t, s, string(inline), Deps{})
	out, err := call("c1", `{"operation_id": "getCustomer", "params": {"customerId": 3}}`)
	require.NoError(t, err)
	want, _ := crm.CustomerByID(3)
	wantJSON, _ := json.Marshal(want)
	require.JSONEq(t, string(wantJSON), string(out.Data))
	require.Equal(t, "/v2/customers/3", s.lastRequest().URL.Path)
}
