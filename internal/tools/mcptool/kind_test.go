package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/mcptest"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/mcptool"
)

// egressTo is a tenant's egress client that allows the given host:ports.
func egressTo(t testing.TB, hosts ...string) *http.Client {
	t.Helper()
	p, err := egress.ParsePolicy(hosts)
	require.NoError(t, err)
	p.Tenant = "demo"
	return loopbackOpen(t).Client(p)
}

// mcpEntry is a catalog entry of the mcp kind with the given config.
func mcpEntry(name, config string) agent.Tool {
	return agent.Tool{Name: name, Kind: "mcp", Config: json.RawMessage(config), Approval: agent.ApprovalAlways}
}

// resolveEntry resolves an entry as the registry does, and fills in what
// the registry adds (kind and source).
func resolveEntry(t testing.TB, entry agent.Tool, env ResolveEnv) ([]agent.Tool, error) {
	t.Helper()
	got, err := MCP().Resolve(context.Background(), entry, env)
	for i := range got {
		got[i].Kind, got[i].Source = entry.Kind, entry.Name
	}
	return got, err
}

func byName(t testing.TB, specs []agent.Tool, name string) agent.Tool {
	t.Helper()
	for _, s := range specs {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no tool %q among %v", name, specs)
	return agent.Tool{}
}

// mcpRunner runs resolved specs as the ExecuteTool activity does, through
// a registry, with the tenant's egress client.
type mcpRunner struct {
	reg  *tools.Registry
	http *http.Client
}

func newMCPRunner(t testing.TB, deps Deps, client *http.Client) *mcpRunner {
	t.Helper()
	reg, err := tools.NewRegistry(deps, tools.Builtin()...)
	require.NoError(t, err)
	return &mcpRunner{reg: reg, http: client}
}

func (r *mcpRunner) run(ctx context.Context, spec agent.Tool, args string, progress func(string)) (Output, error) {
	return r.reg.Execute(ctx, spec, Call{Args: json.RawMessage(args), TenantID: "demo", JobID: "j", CallID: "c1", HTTP: r.http, Progress: progress})
}

func TestMCPConfig(t *testing.T) {
	deps := Deps{MCPCommands: []string{"mcp-server-files", "/opt/mcp/bin/server"}}.WithDefaults()
	ok := []string{
		`{"url": "https://mcp.example.com/mcp"}`,
		`{"url": "http://127.0.0.1:8080/mcp", "tools": ["search", "get_issue", "ns/tool.v2"], "timeout_sec": 110,
		  "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": "env:GH_TOKEN"}]}`,
		`{"command": ["mcp-server-files", "--root", "/data"]}`,
		`{"command": ["/opt/mcp/bin/server"], "env": [{"name": "FILES_TOKEN", "secret": "env:FILES_TOKEN"}]}`,
	}
	for _, c := range ok {
		_, err := MCP().Build(mcpEntry("gh", c), deps)
		require.NoError(t, err, c)
	}
	// A server's limit beyond the default call's needs the entry's own.
	long := mcpEntry("gh", `{"url": "https://a/mcp", "timeout_sec": 600}`)
	long.TimeoutSec = 610
	_, err := MCP().Build(long, deps)
	require.NoError(t, err)
	bad := []struct{ config, want string }{
		{``, "give the server's url or command"},
		{`{}`, "give the server's url (Streamable HTTP) or command (stdio)"},
		{`{"url": "https://a/mcp", "command": ["mcp-server-files"]}`, "give url or command, not both"},
		{`{"url": "ftp://a/mcp"}`, `url: scheme "ftp": want http or https`},
		{`{"url": "https:///mcp"}`, "url: no host"},
		{`{"url": "https://user:pw@a/mcp"}`, "credentials in the URL are not allowed"},
		{`{"url": "https://a/mcp", "colour": "blue"}`, `unknown field "colour"`},
		{`{"url": "https://a/mcp"} {}`, "one JSON object expected, and more follows it"},
		{`{"command": ["sh", "-c", "curl evil"]}`, `command: "sh" may not run: this worker allows mcp-server-files, /opt/mcp/bin/server (AGENTFLOW_MCP_COMMANDS)`},
		{`{"command": ["./mcp-server-files"]}`, "not a relative path"},
		{`{"command": ["/opt/mcp/bin/../bin/server"]}`, "write the path clean"},
		{`{"command": [""]}`, "is not an executable's name"},
		{`{"command": ["mcp-server-files", "a\u0000b"]}`, "argument 1 holds a NUL byte"},
		{`{"url": "https://a/mcp", "tools": ["search", "search"]}`, `tools[1]: "search" is listed twice`},
		{`{"url": "https://a/mcp", "tools": ["two words"]}`, "no spaces or control characters"},
		{`{"url": "https://a/mcp", "tools": [""]}`, "1 to 128 characters"},
		{`{"url": "https://a/mcp", "timeout_sec": 600}`, "timeout_sec 600: want 1 to 110 seconds (the call's own limit, the entry's timeout_sec of 120 s, less 10 s); raise the entry's timeout_sec"},
		{`{"url": "https://a/mcp", "headers": [{"name": "Bad Header", "secret": "env:X"}]}`, `headers[0]: name "Bad Header" is not a header name`},
		{`{"url": "https://a/mcp", "headers": [{"name": "Mcp-Session-Id", "secret": "env:X"}]}`, "the transport sets that header"},
		{`{"url": "https://a/mcp", "headers": [{"name": "Authorization", "secret": "ghp_plainvalue"}]}`, "not a secret reference"},
		{`{"url": "https://a/mcp", "headers": [{"name": "Authorization", "prefix": "Bearer\r\n", "secret": "env:X"}]}`, "prefix holds a line break"},
		{`{"url": "https://a/mcp", "env": [{"name": "X", "secret": "env:X"}]}`, "env is for stdio servers"},
		{`{"command": ["mcp-server-files"], "headers": [{"name": "X", "secret": "env:X"}]}`, "headers are for HTTP servers"},
		{`{"command": ["mcp-server-files"], "env": [{"name": "LD_PRELOAD", "secret": "env:X"}]}`, "changes how programs load"},
		{`{"command": ["mcp-server-files"], "env": [{"name": "PATH", "secret": "env:X"}]}`, "the worker sets that variable"},
		{`{"command": ["mcp-server-files"], "env": [{"name": "A", "secret": "env:X"}, {"name": "A", "secret": "env:Y"}]}`, "is given twice"},
		{`{"command": ["mcp-server-files"], "env": [{"name": "A", "secret": "vault:x"}]}`, "unknown scheme"},
		{`{"url": "https://a/mcp", "tool": "search"}`, "tool is set when the catalog is applied"},
	}
	for _, tt := range bad {
		t.Run(tt.want, func(t *testing.T) {
			_, err := MCP().Build(mcpEntry("gh", tt.config), deps)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}

	// Without an allowlist no command runs.
	_, err = MCP().Build(mcpEntry("files", `{"command": ["mcp-server-files"]}`), Deps{}.WithDefaults())
	require.ErrorContains(t, err, `"mcp-server-files" may not run: this worker allows no stdio MCP servers (AGENTFLOW_MCP_COMMANDS is empty)`)

	// Local execution is refused: calls reach a server.
	local := mcpEntry("gh", ok[0])
	local.Execution = agent.ToolLocal
	_, err = MCP().Build(local, deps)
	require.ErrorContains(t, err, "execution must be activity")
}

func TestMCPResolveHTTP(t *testing.T) {
	srv := mcptest.StartHTTP(t, mcptest.Options{})
	env := ResolveEnv{TenantID: "demo", HTTP: egressTo(t, srv.Addr), Deps: Deps{}.WithDefaults()}

	got, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q}`, srv.URL)), env)
	require.NoError(t, err)
	var names []string
	for _, g := range got {
		names = append(names, g.Name)
	}
	require.Equal(t, []string{"gh_get_issue", "gh_search", "gh_slow"}, names, "every tool, in the server's order")
	search := byName(t, got, "gh_search")
	require.Equal(t, "Search issues by words in their titles.", search.Description)
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(search.Parameters, &schema))
	require.Equal(t, "object", schema.Type)
	require.Contains(t, schema.Properties, "query")
	var cfg MCPConfig
	require.NoError(t, json.Unmarshal(search.Config, &cfg))
	require.Equal(t, MCPConfig{URL: srv.URL, Tool: "search", TimeoutSec: 60}, cfg, "what a call needs, pinned")

	// Only the tools granted.
	got, err = resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q, "tools": ["search", "get_issue"]}`, srv.URL)), env)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "gh_search", got[0].Name, "in the order the catalog lists them")

	tests := []struct {
		name, config string
		env          ResolveEnv
		code         agent.Code
		want         string
	}{
		{"a tool the server does not offer", fmt.Sprintf(`{"url": %q, "tools": ["search", "delete_repo"]}`, srv.URL), env, agent.CodeInvalid,
			`offers no tool "delete_repo"; it offers get_issue, search, slow`},
		{"outside the egress allowlist", fmt.Sprintf(`{"url": %q}`, srv.URL), ResolveEnv{TenantID: "demo", HTTP: egressTo(t, "api.example.com")}, agent.CodeInvalid,
			"egress allowlist"},
		{"no egress at all", fmt.Sprintf(`{"url": %q}`, srv.URL), ResolveEnv{TenantID: "demo"}, agent.CodeInvalid, "no egress is configured"},
		{"no endpoint there", fmt.Sprintf(`{"url": %q}`, strings.TrimSuffix(srv.URL, "/mcp")+"/nothing"), env, agent.CodeInvalid, "HTTP 404: no MCP endpoint there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveEntry(t, mcpEntry("gh", tt.config), tt.env)
			require.True(t, agent.IsCode(err, tt.code), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}

	// A server that is down: Unavailable, or with AllowUnreachable no
	// tools for now.
	down := mcptest.StartHTTP(t, mcptest.Options{})
	down.Kill()
	entry := mcpEntry("gh", fmt.Sprintf(`{"url": %q}`, down.URL))
	env.HTTP = egressTo(t, srv.Addr, down.Addr)
	_, err = resolveEntry(t, entry, env)
	require.True(t, agent.IsCode(err, agent.CodeUnavailable), "%v", err)
	require.ErrorContains(t, err, down.URL+" cannot be reached to list its tools")
	env.AllowUnreachable = true
	got, err = resolveEntry(t, entry, env)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestMCPRunHTTP(t *testing.T) {
	const token = "issues-token-b3f1"
	srv := mcptest.StartHTTP(t, mcptest.Options{Token: token})
	deps := Deps{Secrets: secrets.NewEnv(func(name string) (string, bool) {
		if name == "GH_TOKEN" {
			return token, true
		}
		return "", false
	}), MCPSessions: NewSessions(SessionOptions{})}
	t.Cleanup(deps.MCPSessions.Close)
	client := egressTo(t, srv.Addr)
	config := fmt.Sprintf(`{"url": %q, "timeout_sec": 5, "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": "env:GH_TOKEN"}]}`, srv.URL)
	specs, err := resolveEntry(t, mcpEntry("gh", config), ResolveEnv{TenantID: "demo", HTTP: client, Deps: deps.WithDefaults()})
	require.NoError(t, err)
	r := newMCPRunner(t, deps, client)
	ctx := context.Background()

	// Text content is the text; structured content the data.
	out, err := r.run(ctx, byName(t, specs, "gh_search"), `{"query": "sso"}`, nil)
	require.NoError(t, err)
	require.Equal(t, "2 issues match \"sso\":\n#1 Login fails with SSO (open)\n#3 SSO logout leaves a session (open)", out.Text)
	require.JSONEq(t, `{"issues": [{"number": 1, "title": "Login fails with SSO", "state": "open"}, {"number": 3, "title": "SSO logout leaves a session", "state": "open"}]}`, string(out.Data))

	out, err = r.run(ctx, byName(t, specs, "gh_get_issue"), `{"number": 2}`, nil)
	require.NoError(t, err)
	require.Equal(t, "#2 Export to CSV drops the header\nstate: closed", out.Text, "text parts joined")

	// The tool's error and arguments the server refuses are the model's.
	_, err = r.run(ctx, byName(t, specs, "gh_get_issue"), `{"number": 9}`, nil)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "there is no issue #9")
	_, err = r.run(ctx, byName(t, specs, "gh_get_issue"), `{"number": "nine"}`, nil)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, `want "integer"`)

	// Progress notifications reach the call's progress.
	var mu sync.Mutex
	var progress []string
	out, err = r.run(ctx, byName(t, specs, "gh_slow"), `{"ms": 200}`, func(m string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, m)
	})
	require.NoError(t, err)
	require.Equal(t, "worked for 200 ms", out.Text)
	mu.Lock()
	require.Contains(t, progress, "step 1 of 4 (0/4)")
	require.Contains(t, progress, "step 4 of 4 (3/4)")
	mu.Unlock()

	// Every call went through one session.
	require.Equal(t, 1, deps.MCPSessions.Len())

	// The entry's timeout: the model reads that the call took too long.
	slow := byName(t, specs, "gh_slow")
	slow.Config = json.RawMessage(strings.Replace(string(slow.Config), `"timeout_sec":5`, `"timeout_sec":1`, 1))
	start := time.Now()
	_, err = r.run(ctx, slow, `{"ms": 5000}`, nil)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "no answer within 1s")
	require.Less(t, time.Since(start), 4*time.Second)

	// A secret that is not set fails the call, naming the reference.
	unset := byName(t, specs, "gh_search")
	unset.Config = json.RawMessage(strings.Replace(string(unset.Config), "env:GH_TOKEN", "env:NOT_SET", 1))
	_, err = r.run(ctx, unset, `{"query": "sso"}`, nil)
	require.ErrorContains(t, err, "env:NOT_SET")
	require.NotContains(t, err.Error(), token)

	// A wrong token: the server refuses it.
	wrong := NewSessions(SessionOptions{})
	t.Cleanup(wrong.Close)
	r2 := newMCPRunner(t, Deps{Secrets: secrets.NewEnv(func(string) (string, bool) { return "wrong-token", true }), MCPSessions: wrong}, client)
	_, err = r2.run(ctx, byName(t, specs, "gh_search"), `{"query": "sso"}`, nil)
	require.True(t, agent.IsCode(err, agent.CodePermissionDenied), "%v", err)
	require.ErrorContains(t, err, "refused the request (HTTP 401): check the entry's headers")
}

// TestMCPServerRestart: a server killed mid-call fails the call as
// Unavailable (the activity retries it); once the server is back, calls
// work again, in a new session; an idle session the restarted server no
// longer knows is replaced without an error.
func TestMCPServerRestart(t *testing.T) {
	started := make(chan string, 10)
	srv := mcptest.StartHTTP(t, mcptest.Options{OnCall: func(tool string) { started <- tool }})
	deps := Deps{MCPSessions: NewSessions(SessionOptions{})}
	t.Cleanup(deps.MCPSessions.Close)
	client := egressTo(t, srv.Addr)
	specs, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q}`, srv.URL)), ResolveEnv{TenantID: "demo", HTTP: client})
	require.NoError(t, err)
	r := newMCPRunner(t, deps, client)
	ctx := context.Background()

	errc := make(chan error, 1)
	go func() {
		_, err := r.run(ctx, byName(t, specs, "gh_slow"), `{"ms": 10000}`, nil)
		errc <- err
	}()
	require.Equal(t, "slow", <-started)
	srv.Kill()
	select {
	case err := <-errc:
		require.True(t, agent.IsCode(err, agent.CodeUnavailable), "%v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not fail when its server died")
	}
	require.Equal(t, 0, deps.MCPSessions.Len(), "the broken session is dropped")

	require.NoError(t, srv.Restart())
	out, err := r.run(ctx, byName(t, specs, "gh_slow"), `{"ms": 10}`, nil)
	require.NoError(t, err)
	require.Equal(t, "worked for 10 ms", out.Text)
	<-started

	// The server restarts while the session is idle: the next call
	// reconnects by itself.
	srv.Kill()
	require.NoError(t, srv.Restart())
	out, err = r.run(ctx, byName(t, specs, "gh_search"), `{"query": "csv"}`, nil)
	require.NoError(t, err)
	require.Contains(t, out.Text, "1 issues match")
	require.Equal(t, 1, srv.Calls("search"), "the call ran once")
}

func TestMCPStatelessServer(t *testing.T) {
	srv := mcptest.StartHTTP(t, mcptest.Options{Stateless: true})
	deps := Deps{MCPSessions: NewSessions(SessionOptions{})}
	t.Cleanup(deps.MCPSessions.Close)
	client := egressTo(t, srv.Addr)
	specs, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q, "tools": ["search"]}`, srv.URL)), ResolveEnv{TenantID: "demo", HTTP: client})
	require.NoError(t, err)
	r := newMCPRunner(t, deps, client)
	for range 2 {
		out, err := r.run(context.Background(), specs[0], `{"query": "login"}`, nil)
		require.NoError(t, err)
		require.Contains(t, out.Text, "#1 Login fails with SSO")
	}
}

func TestMCPStdio(t *testing.T) {
	exe := mcptest.BuildStdio(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("remember the milk"), 0o644))
	const secret = "files-secret-9d2"
	t.Setenv("AGENTFLOW_TEST_WORKER_SECRET", "the worker's own")
	deps := Deps{
		MCPCommands: []string{exe},
		MCPEnv:      []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		Secrets: secrets.NewEnv(func(name string) (string, bool) {
			if name == "FILES_TOKEN" {
				return secret, true
			}
			return "", false
		}),
		MCPSessions: NewSessions(SessionOptions{}),
	}
	t.Cleanup(deps.MCPSessions.Close)
	config := fmt.Sprintf(`{"command": [%q, "--root", %q], "env": [{"name": "FILES_TOKEN", "secret": "env:FILES_TOKEN"}]}`, exe, root)

	// Not allowed on this worker: refused at Build and Resolve alike.
	_, err := MCP().Build(mcpEntry("files", config), Deps{MCPCommands: []string{"/usr/bin/other"}}.WithDefaults())
	require.ErrorContains(t, err, "may not run: this worker allows /usr/bin/other")
	_, err = resolveEntry(t, mcpEntry("files", config), ResolveEnv{TenantID: "demo", Deps: Deps{}.WithDefaults()})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "this worker allows no stdio MCP servers")

	specs, err := resolveEntry(t, mcpEntry("files", config), ResolveEnv{TenantID: "demo", Deps: deps.WithDefaults()})
	require.NoError(t, err)
	require.Len(t, specs, 3)
	r := newMCPRunner(t, deps, nil)
	ctx := context.Background()

	out, err := r.run(ctx, byName(t, specs, "files_read_file"), `{"path": "notes.txt"}`, nil)
	require.NoError(t, err)
	require.Equal(t, "remember the milk", out.Text)
	_, err = r.run(ctx, byName(t, specs, "files_read_file"), `{"path": "../etc/passwd"}`, nil)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)

	// The server's environment: the worker's few harmless variables and
	// the secret its config asks for; nothing else of the worker's.
	out, err = r.run(ctx, byName(t, specs, "files_environment"), `{}`, nil)
	require.NoError(t, err)
	var env struct {
		Names  []string          `json:"names"`
		SHA256 map[string]string `json:"sha256"`
	}
	require.NoError(t, json.Unmarshal(out.Data, &env))
	require.Equal(t, []string{"FILES_TOKEN", "LANG", "PATH"}, env.Names)
	require.Equal(t, mcptest.SHA256(secret), env.SHA256["FILES_TOKEN"])

	// One process served every call.
	require.Equal(t, 1, deps.MCPSessions.Len())

	// A worker that no longer allows the command refuses to run it.
	r3 := newMCPRunner(t, Deps{}, nil)
	_, err = r3.run(ctx, byName(t, specs, "files_list_files"), `{}`, nil)
	require.ErrorContains(t, err, "this worker allows no stdio MCP servers")
}

// namesServer offers tools with the names given.
func namesServer(t *testing.T, names ...string) *httptest.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "names", Version: "v1"}, nil)
	for _, n := range names {
		s.AddTool(&mcp.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: n}}}, nil
		})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs
}

func TestMCPToolNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	require.Equal(t, "gh_search", MCPToolName("gh", "search"))
	require.Equal(t, "gh_repos_list_v2", MCPToolName("gh", "repos/list.v2"))
	require.Equal(t, "gh_caf_", MCPToolName("gh", "café"))
	n := MCPToolName("gh", long)
	require.Len(t, n, 64)
	require.NotEqual(t, n, MCPToolName("gh", long+"y"), "long names stay apart")
	require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, n)

	hs := namesServer(t, "a.b", "a_b", "c")
	env := ResolveEnv{TenantID: "demo", HTTP: egressTo(t, strings.TrimPrefix(hs.URL, "http://"))}
	_, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q}`, hs.URL+"/")), env)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, `offers tools "a.b" and "a_b", which both become "gh_a_b"; grant one of them with config.tools`)
	got, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q, "tools": ["a.b", "c"]}`, hs.URL+"/")), env)
	require.NoError(t, err)
	require.Equal(t, "gh_a_b", got[0].Name)

	// The call uses the server's own name.
	r := newMCPRunner(t, Deps{}, env.HTTP)
	out, err := r.run(context.Background(), got[0], `{}`, nil)
	require.NoError(t, err)
	require.Equal(t, "a.b", out.Text)
}

func TestMCPOutput(t *testing.T) {
	out, err := MCPOutput(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "a chart"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")},
		&mcp.ResourceLink{Name: "report", URI: "file:///r.pdf"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///n.txt", Text: "note"}},
	}})
	require.NoError(t, err)
	require.Equal(t, "a chart\n[image image/png, 3 bytes]\n[resource report: file:///r.pdf]\nnote", out.Text)
	require.Empty(t, out.Data)

	out, err = MCPOutput(&mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}})
	require.NoError(t, err)
	require.Empty(t, out.Text, "the runtime shows small data when there is no text")
	require.JSONEq(t, `{"n": 1}`, string(out.Data))

	out, err = MCPOutput(&mcp.CallToolResult{})
	require.NoError(t, err)
	require.Equal(t, "the tool returned nothing", out.Text)

	_, err = MCPOutput(&mcp.CallToolResult{IsError: true})
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
}

// TestMCPSessionsIdle: an idle session is closed after the idle timeout;
// a full pool makes room by closing the least recently used idle one.
func TestMCPSessionsIdle(t *testing.T) {
	var initializes atomic.Int32
	srv := mcptest.StartHTTP(t, mcptest.Options{})
	pool := NewSessions(SessionOptions{IdleTimeout: 200 * time.Millisecond, MaxSessions: 1})
	t.Cleanup(pool.Close)
	client := egressTo(t, srv.Addr)
	specs, err := resolveEntry(t, mcpEntry("gh", fmt.Sprintf(`{"url": %q, "tools": ["search"]}`, srv.URL)), ResolveEnv{TenantID: "demo", HTTP: client})
	require.NoError(t, err)
	r := newMCPRunner(t, Deps{MCPSessions: pool}, client)
	_, err = r.run(context.Background(), specs[0], `{"query": "a"}`, nil)
	require.NoError(t, err)
	initializes.Add(1)
	require.Equal(t, 1, pool.Len())
	require.Eventually(t, func() bool { return pool.Len() == 0 }, 5*time.Second, 20*time.Millisecond, "closed when idle")

	// Two tenants, room for one session: the idle one makes room.
	_, err = r.run(context.Background(), specs[0], `{"query": "a"}`, nil)
	require.NoError(t, err)
	_, err = r.reg.Execute(context.Background(), specs[0], Call{Args: json.RawMessage(`{"query": "b"}`), TenantID: "acme", HTTP: client})
	require.NoError(t, err)
	require.Equal(t, 1, pool.Len())
	for _, k := range pool.Keys() {
		require.True(t, strings.HasPrefix(k, "acme\x00"), "the newest session stays")
	}
	require.True(t, slices.Contains([]int32{1}, initializes.Load()))
}

func FuzzMCPConfig(f *testing.F) {
	for _, s := range []string{
		`{"url": "https://mcp.example.com/mcp", "tools": ["search"], "timeout_sec": 30}`,
		`{"command": ["mcp-server-files", "--root", "/data"], "env": [{"name": "T", "secret": "env:T"}]}`,
		`{"url": "http://a/mcp", "headers": [{"name": "Authorization", "prefix": "Bearer ", "secret": "env:GH_TOKEN"}]}`,
		`{"url": "", "command": []}`, `null`, `[]`, `{"tool": "x"}`, `{"url": "https://a/mcp", "tools": ["a", "a"]}`,
	} {
		f.Add([]byte(s))
	}
	deps := Deps{MCPCommands: []string{"mcp-server-files"}}.WithDefaults()
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := DecodeMCPConfig(raw, deps, agent.DefaultToolTimeout)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.True(t, (cfg.URL == "") != (len(cfg.Command) == 0), "exactly one of url and command")
		if len(cfg.Command) > 0 {
			require.Equal(t, "mcp-server-files", cfg.Command[0], "only an allowed command")
		}
		require.Positive(t, cfg.Timeout())
		require.LessOrEqual(t, cfg.Timeout(), agent.DefaultToolTimeout-MCPCallMargin*time.Second)
		for _, h := range cfg.Headers {
			require.NoError(t, secrets.ValidateRef(h.Secret))
			require.NotContains(t, h.Prefix, "\n")
		}
		for _, e := range cfg.Env {
			require.False(t, ReservedEnv(e.Name))
		}
	})
}

func TestMCPEnvFrom(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "HOME=/home/w", "AGENTFLOW_DATABASE_URL=postgres://secret", "LANG=C.UTF-8",
		"GH_TOKEN=ghp_x", "TZ=UTC", "LD_PRELOAD=/x.so", "TMPDIR=/tmp", "LC_ALL=C", "PATHS=no"}
	require.Equal(t, []string{"PATH=/usr/bin", "HOME=/home/w", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=/tmp", "LC_ALL=C"}, EnvFrom(environ),
		"what programs need to run; none of the worker's secrets")
}
