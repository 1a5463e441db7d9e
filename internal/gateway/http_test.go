package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/doors"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// httpRoutes is every route of the HTTP API, by the RPC it calls.
var httpRoutes = map[string][]string{
	"AgentService_Start":                      {"POST /v1/turns"},
	"AgentService_Invoke":                     {"POST /v1/turns:invoke", "POST /test/chat"},
	"AgentService_ListEvents":                 {"GET /v1/{stream_id}/events"},
	"AgentService_Cancel":                     {"POST /v1/{stream_id}/cancel"},
	"AgentService_ListDeliveries":             {"GET /v1/{stream_id}/deliveries"},
	"AgentService_ListPendingApprovals":       {"GET /v1/{stream_id}/approvals"},
	"AgentService_Approve":                    {"POST /v1/{stream_id}/approvals/{call_id}"},
	"AgentService_ListGrants":                 {"GET /v1/grants"},
	"AgentService_RevokeGrant":                {"POST /v1/grants/{grant_id}/revoke"},
	"AgentService_ListPendingQuestions":       {"GET /v1/{stream_id}/questions"},
	"AgentService_Answer":                     {"POST /v1/{stream_id}/questions/{call_id}"},
	"AgentService_GetResult":                  {"GET /v1/results"},
	"AgentService_ListAgents":                 {"GET /v1/agents"},
	"AgentService_SendMessage":                {"POST /v1/conversations/{session_id}/messages"},
	"AgentService_GetTranscript":              {"GET /v1/conversations/{session_id}/transcript"},
	"AgentService_ForkSession":                {"POST /v1/conversations/{session_id}:fork"},
	"CatalogService_UpsertCatalog":            {"POST /v1/catalog"},
	"CatalogService_ListRules":                {"GET /v1/rules"},
	"CatalogService_RouteDryRun":              {"POST /v1/routing/dry-run"},
	"CatalogService_ListProcesses":            {"GET /v1/processes"},
	"CatalogService_GetProcess":               {"GET /v1/processes/{tag}"},
	"CatalogService_ListProcessVersions":      {"GET /v1/processes/{tag}/versions"},
	"CatalogService_GetUsage":                 {"GET /v1/usage"},
	"EvalService_StartEval":                   {"POST /v1/evals"},
	"EvalService_GetEval":                     {"GET /v1/evals/{eval_id}"},
	"EvalService_RecordDataset":               {"POST /v1/evals/datasets"},
	"AgentService_Stream (no route)":          nil,
	"AgentService_Resume (no route)":          nil,
	"CatalogService_StreamCatalog (no route)": nil,
}

// ownRoutes are the RPCs whose HTTP routes are the gateway's own
// (internal/gateway/knowledgeapi, memories.go: their JSON is not the
// messages'), outside the OpenAPI document.
var ownRoutes = map[string][]string{
	"KnowledgeService_CreateCollection": {"POST /v1/collections"},
	"KnowledgeService_ListCollections":  {"GET /v1/collections"},
	"KnowledgeService_GetCollection":    {"GET /v1/collections/{name}"},
	"KnowledgeService_DeleteCollection": {"DELETE /v1/collections/{name}"},
	"KnowledgeService_IngestDocuments":  {"POST /v1/collections/{name}/documents"},
	"KnowledgeService_GetIngest":        {"GET /v1/ingests/{id}"},
	"KnowledgeService_ListDocuments":    {"GET /v1/collections/{name}/documents"},
	"KnowledgeService_GetDocument":      {"GET /v1/collections/{name}/documents/{id}"},
	"KnowledgeService_DeleteDocument":   {"DELETE /v1/collections/{name}/documents/{id}"},
	"KnowledgeService_SearchCollection": {"POST /v1/collections/{name}/search"},
	"KnowledgeService_ListMemories":     {"GET /v1/memories"},
	"KnowledgeService_DeleteMemory":     {"DELETE /v1/memories/{id}"},
	"KnowledgeService_EraseMemories":    {"DELETE /v1/memories"},
}

// startHTTPAPI serves the HTTP API of a gateway with no backends, with
// every door: what these tests send is refused before any call reaches
// the services.
func startHTTPAPI(t testing.TB, origins ...string) *httptest.Server {
	t.Helper()
	return gatewaytest.StartHTTPAPI(t, doors.All(nil), origins...)
}

// TestOpenAPIDocument: GET /openapi.json is a valid OpenAPI document
// (also once converted to OpenAPI 3) with every route, each under the
// RPC it calls; every unary RPC of the services has a route, there or
// among the gateway's own (ownRoutes), and the streaming ones have none.
func TestOpenAPIDocument(t *testing.T) {
	srv := startHTTPAPI(t)
	resp, err := http.Get(srv.URL + gateway.OpenAPIPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	var doc openapi2.T
	require.NoError(t, json.Unmarshal(body, &doc))
	require.Equal(t, "2.0", doc.Swagger)
	v3, err := openapi2conv.ToV3(&doc)
	require.NoError(t, err)
	require.NoError(t, v3.Validate(context.Background()))

	got := map[string][]string{}
	for path, item := range doc.Paths {
		for method, op := range item.Operations() {
			id := strings.TrimRight(op.OperationID, "0123456789") // a second binding is Xxx2
			got[id] = append(got[id], method+" "+path)
		}
	}
	want := map[string][]string{}
	for id, routes := range httpRoutes {
		if routes != nil {
			want[id] = routes
		}
	}
	require.Len(t, got, len(want))
	for id, routes := range want {
		require.ElementsMatch(t, routes, got[id], id)
	}

	services := pb.File_agentflow_v1_agentflow_proto.Services()
	for i := range services.Len() {
		methods := services.Get(i).Methods()
		for j := range methods.Len() {
			m := methods.Get(j)
			id := string(services.Get(i).Name()) + "_" + string(m.Name())
			if m.IsStreamingServer() || m.IsStreamingClient() {
				require.Contains(t, httpRoutes, id+" (no route)", "a streaming RPC")
				require.NotContains(t, got, id)
				continue
			}
			if _, own := ownRoutes[id]; own {
				require.NotContains(t, got, id, "a route of the gateway's own")
				continue
			}
			require.Contains(t, got, id, "every unary RPC has a route")
		}
	}
}

// problem reads an answer that must be problem details.
func problem(t *testing.T, resp *http.Response) gateway.Problem {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, gateway.ProblemContentType, resp.Header.Get("Content-Type"))
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	var p gateway.Problem
	require.NoError(t, dec.Decode(&p))
	require.Equal(t, resp.StatusCode, p.Status)
	require.Equal(t, gateway.ProblemTypePrefix+p.Title, p.Type)
	require.NotEmpty(t, p.Detail)
	return p
}

// TestHTTPRefusals: requests the HTTP API refuses before any call reaches
// a service, each with problem details that say what is wrong.
func TestHTTPRefusals(t *testing.T) {
	srv := startHTTPAPI(t)
	big := `{"prompt": "` + strings.Repeat("x", gateway.MaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, token, body string
		chunked                         bool
		status                          int
		title, detail                   string
	}{
		{"no token", "GET", "/v1/agents", "", "", false, 401, "Unauthenticated", "missing bearer token"},
		{"unknown token", "GET", "/v1/agents", "nope", "", false, 401, "Unauthenticated", "unknown token"},
		{"token in the query", "GET", "/v1/agents?access_token=tok", "", "", false, 400, "InvalidRequest", `unknown query parameter "access_token"`},
		{"misspelt parameter", "GET", "/v1/agents?pagesize=3", "tok", "", false, 400, "InvalidRequest", `unknown query parameter "pagesize"`},
		{"malformed JSON", "POST", "/v1/turns", "tok", `{"prompt": "hi"`, false, 400, "InvalidRequest", "request body is not JSON"},
		{"not an object", "POST", "/v1/turns", "tok", `["hi"]`, false, 400, "InvalidRequest", "request body"},
		{"more after the value", "POST", "/v1/turns", "tok", `{"prompt": "hi"} {"prompt": "again"}`, false, 400, "InvalidRequest", "more after the JSON value"},
		{"unknown field", "POST", "/v1/turns", "tok", `{"prompt": "hi", "tenant_id": "other"}`, false, 400, "InvalidRequest", `unknown field "tenant_id"`},
		{"wrong type", "POST", "/v1/turns:invoke", "tok", `{"prompt": 12}`, false, 400, "InvalidRequest", "request body"},
		{"body too large", "POST", "/v1/turns", "tok", big, false, 413, "InvalidRequest", "larger than"},
		{"body too large, chunked", "POST", "/v1/turns", "tok", big, true, 413, "InvalidRequest", "larger than"},
		{"no route", "GET", "/v1/nothing", "tok", "", false, 404, "NotFound", "no route GET /v1/nothing"},
		{"not a stream id", "GET", "/v1/turn/demo/events", "tok", "", false, 404, "NotFound", "no route"},
		{"a wait too long", "GET", "/v1/turn/demo/j1/events?wait_sec=61", "tok", "", false, 400, "InvalidRequest", "wait_sec 61: want 0 (answer at once) to 60 seconds"},
		{"a negative wait", "GET", "/v1/turn/demo/j1/events?wait_sec=-1", "tok", "", false, 400, "InvalidRequest", "wait_sec -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
				if tt.chunked {
					body = io.MultiReader(body) // no length known: sent chunked
				}
			}
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, body)
			require.NoError(t, err)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.status == 401 {
				require.Equal(t, `Bearer realm="agentflow"`, resp.Header.Get("WWW-Authenticate"))
			}
			p := problem(t, resp)
			require.Equal(t, tt.title, p.Title)
			require.Contains(t, p.Detail, tt.detail)
			require.NotContains(t, p.Detail, "tok\"", "the token is never echoed")
		})
	}
}

func TestParseCORSOrigins(t *testing.T) {
	got, err := gateway.ParseCORSOrigins(" https://App.example.com , http://localhost:3000/,")
	require.NoError(t, err)
	require.Equal(t, []string{"https://app.example.com", "http://localhost:3000"}, got)
	got, err = gateway.ParseCORSOrigins("")
	require.NoError(t, err)
	require.Empty(t, got, "nothing open by default")
	for v, want := range map[string]string{
		"*":                           "would open the API to any page",
		"null":                        "would open the API to any page",
		"app.example.com":             "want an http:// or https:// origin",
		"ftp://app.example.com":       "want an http:// or https:// origin",
		"https://":                    "with a host",
		"https://app.example.com/ui":  "nothing more",
		"https://u:p@app.example.com": "nothing more",
		"https://*.example.com":       "with a host",
	} {
		_, err := gateway.ParseCORSOrigins(v)
		require.ErrorContains(t, err, want, v)
		require.ErrorContains(t, err, "AGENTFLOW_CORS_ORIGINS entry", v)
	}
}

// TestCORS: a page of an allowed origin is answered the preflight and may
// read answers; any other origin, method or header is refused, and its
// pages may not read what they get.
func TestCORS(t *testing.T) {
	const app = "https://app.example.com"
	srv := startHTTPAPI(t, app)
	preflight := func(origin, method, headers string) *http.Response {
		req, err := http.NewRequest(http.MethodOptions, srv.URL+"/v1/turns", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		if headers != "" {
			req.Header.Set("Access-Control-Request-Headers", headers)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}

	resp := preflight(app, "POST", "authorization, content-type")
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "GET, POST", resp.Header.Get("Access-Control-Allow-Methods"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "authorization")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"), "no cookies: never credentials")
	require.Contains(t, resp.Header.Values("Vary"), "Origin")

	for name, tt := range map[string]struct{ origin, method, headers, detail string }{
		"another origin":    {"https://evil.example.com", "POST", "authorization", "origin \"https://evil.example.com\" may not call"},
		"a scheme's origin": {"http://app.example.com", "POST", "", "may not call"},
		"another method":    {app, "DELETE", "", "method \"DELETE\""},
		"another header":    {app, "POST", "authorization, x-tenant", "header \"x-tenant\""},
	} {
		t.Run(name, func(t *testing.T) {
			resp := preflight(tt.origin, tt.method, tt.headers)
			require.Equal(t, http.StatusForbidden, resp.StatusCode)
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
			p := problem(t, resp)
			require.Equal(t, "PermissionDenied", p.Title)
			require.Contains(t, p.Detail, tt.detail)
		})
	}

	get := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/agents", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp = get(app)
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, http.StatusUnauthorized, problem(t, resp).Status, "CORS lets the page read the answer; the token still decides")
	resp = get("https://evil.example.com")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	resp.Body.Close()
}

// FuzzHTTPRequest sends any method, path and body, without a token: the
// API answers problem details with a 4xx status and never panics or
// reaches a service.
func FuzzHTTPRequest(f *testing.F) {
	for _, seed := range []struct{ method, path, body string }{
		{"POST", "/v1/turns", `{"prompt": "hi"}`},
		{"POST", "/v1/turns", `{"prompt": `},
		{"GET", "/v1/turn/demo/j1/events?after_index=3", ""},
		{"GET", "/v1/turn%2Fdemo%2Fj1/events?page_size=x", ""},
		{"POST", "/v1/turn/demo/j1/approvals/c%2F1", `{"approved": true}`},
		{"GET", "/v1/usage?since=2026-01-01T00:00:00Z&group_by=agent", ""},
		{"POST", "/test/chat", `{"prompt": "What is 12.5 * 4?", "context": {"metadata": {"a": "b"}}}`},
		{"GET", "/v1/processes/%zz", ""},
		{"PUT", "/v1/catalog", `{}`},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	srv := startHTTPAPI(f)
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !slices.Contains([]string{"GET", "POST", "PUT", "DELETE", "PATCH"}, method) || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, gateway.OpenAPIPath) {
			t.Skip()
		}
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(string(body)))
		if err != nil || strings.ContainsFunc(req.URL.RequestURI(), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			// Not a request a client could send: Go's client writes a
			// target with spaces or controls as it is, and net/http's
			// server refuses the request line before any handler.
			t.Skip()
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.GreaterOrEqual(t, resp.StatusCode, 400)
		require.Less(t, resp.StatusCode, 500, "%s %s", method, path)
		problem(t, resp)
	})
}

// FuzzParseCORSOrigins: any setting is refused with an error or read as
// origins that read back as themselves.
func FuzzParseCORSOrigins(f *testing.F) {
	for _, s := range []string{"https://a.example", "http://localhost:3000,https://b.example/", "*", "https://x.example/p?q#f", "http://[::1]:8080"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := gateway.ParseCORSOrigins(v)
		if err != nil {
			return
		}
		again, err := gateway.ParseCORSOrigins(strings.Join(got, ","))
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

// TestNotUTF8: a path or query that is not UTF-8 once unescaped is
// refused as invalid, for every door, before any handler.
func TestNotUTF8(t *testing.T) {
	srv := startHTTPAPI(t)
	for _, target := range []string{"/v1/usage?group_by=%85", "/v1/usage?%ff=agent", "/v1/turn/demo/j%ff/events"} {
		resp, err := http.Get(srv.URL + target)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, target)
		require.Contains(t, problem(t, resp).Detail, "not valid UTF-8", target)
	}
}
