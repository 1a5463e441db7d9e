package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
)

// The credentials of the outbound tests: env:OUT_KEY goes in a header,
// env:OUT_QUERY_KEY in the query.
const (
	outKey      = "out-key-4e8a1c9b2d"
	outQueryKey = "out-query+key/7f3e5a1c" // with what a query escapes
)

// outbound is what every tool kind is tried against: an API on 127.0.0.1
// and a second host on 127.0.0.2, both in the tenant's allowlist. The API
// echoes every header and query parameter it gets (/echo, as rows, and in
// a response header), redirects to the second host (/away), and serves an
// MCP server whose tool whoami echoes the headers of the request (/mcp),
// or redirects there too (/mcp-away). The second host records what it
// gets.
type outbound struct {
	api, other *httptest.Server
	client     *http.Client // the tenant's egress client

	mu       sync.Mutex
	apiGot   []*http.Request
	otherGot []*http.Request
}

func startOutbound(t *testing.T) *outbound {
	t.Helper()
	o := &outbound{}
	o.other = serveOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.otherGot = append(o.otherGot, r.Clone(context.Background()))
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"stolen":"nothing"}]`)
	}))
	whoami := mcp.NewServer(&mcp.Implementation{Name: "whoami", Version: "v1"}, nil)
	mcp.AddTool(whoami, &mcp.Tool{Name: "whoami", Description: "Say what the request carried."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
			h := req.Extra.Header
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("you sent %v", h)}}},
				map[string]any{"headers": h}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return whoami }, nil)
	o.api = serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.apiGot = append(o.apiGot, r.Clone(context.Background()))
		o.mu.Unlock()
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, o.other.URL+"/steal", http.StatusFound)
		case "/mcp-away":
			http.Redirect(w, r, o.other.URL+"/mcp", http.StatusTemporaryRedirect)
		case "/mcp":
			mcpHandler.ServeHTTP(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Echo", r.Header.Get("X-Api-Key")+" "+r.URL.RawQuery)
			var rows []map[string]string
			for name, vs := range r.Header {
				rows = append(rows, map[string]string{"from": "header", "name": name, "value": strings.Join(vs, ", ")})
			}
			for name, vs := range r.URL.Query() {
				rows = append(rows, map[string]string{"from": "query", "name": name, "value": strings.Join(vs, ", ")})
			}
			rows = append(rows, map[string]string{"from": "url", "name": "", "value": r.URL.String()})
			sort.Slice(rows, func(i, j int) bool { return rows[i]["from"]+rows[i]["name"] < rows[j]["from"]+rows[j]["name"] })
			_ = json.NewEncoder(w).Encode(rows)
		}
	}))
	o.client = egressTo(t, o.apiHost(), o.otherHost())
	return o
}

// serveOn serves h on addr until the test ends.
func serveOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (o *outbound) apiHost() string   { return strings.TrimPrefix(o.api.URL, "http://") }
func (o *outbound) otherHost() string { return strings.TrimPrefix(o.other.URL, "http://") }

// lastAPIRequest is the last request the API got.
func (o *outbound) lastAPIRequest() *http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.apiGot[len(o.apiGot)-1]
}

// requireOtherSawNothing: the second host got no request, so nothing of
// a credential.
func (o *outbound) requireOtherSawNothing(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.otherGot {
		all := r.URL.String() + fmt.Sprint(r.Header)
		require.NotContains(t, all, outKey, "the second host sees no credential")
		require.NotContains(t, all, url.QueryEscape(outQueryKey), "the second host sees no credential")
	}
	require.Empty(t, o.otherGot, "a redirect away from the credentials' host is not followed")
}

func outboundDeps() Deps {
	env := map[string]string{"OUT_KEY": outKey, "OUT_QUERY_KEY": outQueryKey}
	return Deps{Secrets: secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}
}

// requireNoSecret: neither credential is anywhere in what the call gave,
// in any form an echo gives it.
func requireNoSecret(t *testing.T, out Output, err error) {
	t.Helper()
	all, merr := json.Marshal(out)
	require.NoError(t, merr)
	text := string(all)
	if err != nil {
		text += err.Error()
	}
	for _, v := range []string{outKey, outQueryKey} {
		quoted, _ := json.Marshal(v)
		for _, f := range []string{v, url.QueryEscape(v), string(quoted[1 : len(quoted)-1])} {
			require.NotContains(t, text, f)
		}
	}
}

func TestOutboundExecutePipeline(t *testing.T) {
	o := startOutbound(t)
	r, err := NewRegistry(outboundDeps(), Builtin()...)
	require.NoError(t, err)
	cache := &memCache{m: map[string]Output{}}
	spec := agent.Tool{Name: "execute_pipeline", Kind: "execute_pipeline", Config: json.RawMessage(fmt.Sprintf(
		`{"credentials": [{"host": %q, "header": "X-Api-Key", "secret": "env:OUT_KEY"}, {"host": %q, "query": "api_key", "secret": "env:OUT_QUERY_KEY"}]}`,
		o.apiHost(), o.apiHost()))}
	call := func(url string) (Output, error) {
		return r.Execute(context.Background(), spec, Call{TenantID: "demo", HTTP: o.client, Cache: cache,
			Args: json.RawMessage(`{"session_id": "s", "pipeline": [{"step": "http_request", "url": "` + url + `", "params": {"q": "x"}}]}`)})
	}

	// The API gets its credentials and echoes them; the output holds
	// their placeholders.
	out, err := call(o.api.URL + "/echo")
	require.NoError(t, err)
	require.Equal(t, outKey, o.lastAPIRequest().Header.Get("X-Api-Key"))
	require.Equal(t, outQueryKey, o.lastAPIRequest().URL.Query().Get("api_key"))
	requireNoSecret(t, out, nil)
	require.Contains(t, string(out.Data), `{"from":"header","name":"X-Api-Key","value":"[secret env:OUT_KEY]"}`)
	require.Contains(t, string(out.Data), `{"from":"query","name":"api_key","value":"[secret env:OUT_QUERY_KEY]"}`)
	require.NotNil(t, out.Preview)
	for _, cached := range cache.m {
		requireNoSecret(t, cached, nil)
	}

	// A redirect to the second host is not followed.
	out, err = call(o.api.URL + "/away")
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "302 Found redirects from "+o.api.URL+"/away to "+o.other.URL+"/steal, another host: not followed")
	requireNoSecret(t, out, err)
	o.requireOtherSawNothing(t)
}

func TestOutboundCompositePipeline(t *testing.T) {
	o := startOutbound(t)
	r, err := NewRegistry(outboundDeps(), Builtin()...)
	require.NoError(t, err)
	composite := func(url string) agent.Tool {
		return agent.Tool{Name: "echo_saved", Kind: "composite_pipeline", Config: json.RawMessage(fmt.Sprintf(
			`{"pipeline": {"session_id": "s", "pipeline": [{"step": "http_request", "url": %q, "params": {"q": "x"}}]}, `+
				`"cache_ttl_sec": 0, "credentials": [{"host": %q, "header": "X-Api-Key", "secret": "env:OUT_KEY"}, {"host": %q, "query": "api_key", "secret": "env:OUT_QUERY_KEY"}]}`,
			url, o.apiHost(), o.apiHost()))}
	}
	call := func(spec agent.Tool) (Output, error) {
		return r.Execute(context.Background(), spec, Call{TenantID: "demo", HTTP: o.client, Args: json.RawMessage(`{"q": "y"}`)})
	}

	out, err := call(composite(o.api.URL + "/echo"))
	require.NoError(t, err)
	require.Equal(t, "y", o.lastAPIRequest().URL.Query().Get("q"), "the composite's argument")
	require.Equal(t, outKey, o.lastAPIRequest().Header.Get("X-Api-Key"))
	requireNoSecret(t, out, nil)
	require.Contains(t, string(out.Data), `"value":"[secret env:OUT_KEY]"`)
	require.Contains(t, string(out.Data), `"value":"[secret env:OUT_QUERY_KEY]"`)

	out, err = call(composite(o.api.URL + "/away"))
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "another host: not followed")
	requireNoSecret(t, out, err)
	o.requireOtherSawNothing(t)
}

// echoDocument describes the outbound API's /echo and /away.
const echoDocument = `{"openapi": "3.0.3", "info": {"title": "Echo", "version": "1"}, "paths": {
	"/echo": {"get": {"operationId": "echo", "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
		"responses": {"200": {"description": "what the API got", "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}}}}},
	"/away": {"get": {"operationId": "away", "responses": {"302": {"description": "elsewhere"}}}}}}`

func TestOutboundOpenAPIAction(t *testing.T) {
	o := startOutbound(t)
	r, err := NewRegistry(outboundDeps(), Builtin()...)
	require.NoError(t, err)
	spec := entry(`{"spec": `+echoDocument+`, "server": "`+o.api.URL+`", "auth": [`+
		`{"type": "api_key", "in": "header", "name": "X-Api-Key", "secret": "env:OUT_KEY"}, `+
		`{"type": "api_key", "in": "query", "name": "api_key", "secret": "env:OUT_QUERY_KEY"}]}`, agent.ApprovalNever)
	call := func(args string) (Output, error) {
		return r.Execute(context.Background(), spec, Call{TenantID: "demo", JobID: "j", CallID: "c", HTTP: o.client, Args: json.RawMessage(args)})
	}

	out, err := call(`{"operation_id": "echo", "params": {"q": "x"}}`)
	require.NoError(t, err)
	require.Equal(t, outKey, o.lastAPIRequest().Header.Get("X-Api-Key"))
	require.Equal(t, outQueryKey, o.lastAPIRequest().URL.Query().Get("api_key"))
	requireNoSecret(t, out, nil)
	require.Contains(t, string(out.Data), `"value":"[secret env:OUT_KEY]"`)
	require.Contains(t, string(out.Data), `"value":"[secret env:OUT_QUERY_KEY]"`)

	out, err = call(`{"operation_id": "away"}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, "crm: away answered 302 Found, a redirect to "+o.other.URL+"/steal, which the tool does not follow to another host")
	requireNoSecret(t, out, err)
	o.requireOtherSawNothing(t)
}

func TestOutboundMCP(t *testing.T) {
	o := startOutbound(t)
	deps := outboundDeps()
	deps.MCPSessions = mcptool.NewSessions(mcptool.SessionOptions{})
	t.Cleanup(deps.MCPSessions.Close)
	r, err := NewRegistry(deps, Builtin()...)
	require.NoError(t, err)
	config := func(path string) string {
		return fmt.Sprintf(`{"url": %q, "timeout_sec": 10, "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": "env:OUT_KEY"}, `+
			`{"name": "X-Api-Key", "secret": "env:OUT_QUERY_KEY"}]}`, o.api.URL+path)
	}
	env := ResolveEnv{TenantID: "demo", HTTP: o.client, Deps: r.Deps()}
	specs, err := resolveEntry(t, mcpEntry("who", config("/mcp")), env)
	require.NoError(t, err)
	for _, spec := range specs {
		require.NotContains(t, spec.Description+string(spec.Parameters)+string(spec.Config), outKey)
	}
	call := func(spec agent.Tool) (Output, error) {
		return r.Execute(context.Background(), spec, Call{TenantID: "demo", JobID: "j", CallID: "c", HTTP: o.client, Args: json.RawMessage(`{}`)})
	}

	// Twice: the second call's session was opened by the first.
	for range 2 {
		out, err := call(byName(t, specs, "who_whoami"))
		require.NoError(t, err)
		require.Equal(t, "Bearer "+outKey, o.lastAPIRequest().Header.Get("Authorization"))
		require.Equal(t, outQueryKey, o.lastAPIRequest().Header.Get("X-Api-Key"))
		requireNoSecret(t, out, nil)
		require.Contains(t, out.Text, "[Bearer [secret env:OUT_KEY]]")
		require.Contains(t, string(out.Data), `"X-Api-Key":["[secret env:OUT_QUERY_KEY]"]`)
	}

	// An endpoint that redirects to the second host: neither listing its
	// tools nor calling one follows it.
	_, err = resolveEntry(t, mcpEntry("away", config("/mcp-away")), env)
	require.ErrorContains(t, err, "307 Temporary Redirect redirects from "+o.api.URL+"/mcp-away to "+o.other.URL+"/mcp, another host: not followed")
	resolved := mcpEntry("away_whoami", strings.Replace(config("/mcp-away"), `"url"`, `"tool": "whoami", "url"`, 1))
	resolved.Source = "away"
	out, err := call(resolved)
	require.ErrorContains(t, err, "another host: not followed")
	requireNoSecret(t, out, err)
	o.requireOtherSawNothing(t)
}

// TestOutboundMCPStdio: a stdio server that shows its environment (the
// file server reading /proc/self/environ) shows the placeholder of the
// secret its config gave it, in the first call and in later calls of the
// same process.
func TestOutboundMCPStdio(t *testing.T) {
	require.FileExists(t, "/proc/self/environ", "the test reads a process's environment from /proc")
	exe := mcptest.BuildStdio(t)
	root := t.TempDir()
	require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(root, "environ")))
	deps := outboundDeps()
	deps.MCPCommands = []string{exe}
	deps.MCPSessions = mcptool.NewSessions(mcptool.SessionOptions{})
	t.Cleanup(deps.MCPSessions.Close)
	r, err := NewRegistry(deps, Builtin()...)
	require.NoError(t, err)
	config := fmt.Sprintf(`{"command": [%q, "--root", %q], "env": [{"name": "FILES_TOKEN", "secret": "env:OUT_KEY"}]}`, exe, root)
	specs, err := resolveEntry(t, mcpEntry("files", config), ResolveEnv{TenantID: "demo", Deps: r.Deps()})
	require.NoError(t, err)
	for range 2 {
		out, err := r.Execute(context.Background(), byName(t, specs, "files_read_file"), Call{TenantID: "demo", Args: json.RawMessage(`{"path": "environ"}`)})
		require.NoError(t, err)
		require.Contains(t, out.Text, "FILES_TOKEN=[secret env:OUT_KEY]")
		requireNoSecret(t, out, nil)
	}
	require.Equal(t, 1, deps.MCPSessions.Len(), "one process served both calls")
}
