// Package mcptest is a real MCP server for tests, written with the official
// Go SDK: a small issue tracker (search, get_issue, slow) that tests serve
// over Streamable HTTP, and a file reader (list_files, read_file,
// environment) that the program in ./stdio serves over stdio, and a
// policy checker for tool guards (PolicyServer). Tests start them; nothing
// in them is faked.
//
// It imports nothing of agentflow's.
//
// Only tests import it, like internal/testserver.
package mcptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue is one issue of the tracker.
type Issue struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	State  string `json:"state"`
}

// Issues are the tracker's issues.
var Issues = []Issue{
	{Number: 1, Title: "Login fails with SSO", State: "open"},
	{Number: 2, Title: "Export to CSV drops the header", State: "closed"},
	{Number: 3, Title: "SSO logout leaves a session", State: "open"},
}

// Options of the issue tracker.
type Options struct {
	// Token, when set, is the bearer token every HTTP request must carry.
	Token string
	// Stateless serves the sessionless Streamable HTTP mode (protocol
	// 2026-07-28); default: sessions.
	Stateless bool
	// OnCall, when set, is called as each tool call starts.
	OnCall func(tool string)
}

// Server is the issue tracker as an MCP server.
func Server(opts Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "issues", Version: "v1.0.0"}, nil)
	called := func(name string) {
		if opts.OnCall != nil {
			opts.OnCall(name)
		}
	}
	type searchIn struct {
		Query string `json:"query" jsonschema:"words to look for in titles"`
		// State is optional, and not nullable: the SDK refuses a null
		// for it, as a server that checks its arguments does.
		State string `json:"state,omitempty" jsonschema:"only the issues in this state: open or closed"`
	}
	type searchOut struct {
		Issues []Issue `json:"issues"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: "Search issues by words in their titles."},
		func(_ context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, searchOut, error) {
			called("search")
			out := searchOut{Issues: []Issue{}}
			for _, is := range Issues {
				if strings.Contains(strings.ToLower(is.Title), strings.ToLower(in.Query)) && (in.State == "" || is.State == in.State) {
					out.Issues = append(out.Issues, is)
				}
			}
			var lines []string
			for _, is := range out.Issues {
				lines = append(lines, fmt.Sprintf("#%d %s (%s)", is.Number, is.Title, is.State))
			}
			text := fmt.Sprintf("%d issues match %q", len(out.Issues), in.Query)
			if len(lines) > 0 {
				text += ":\n" + strings.Join(lines, "\n")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
		})
	type getIn struct {
		Number int `json:"number" jsonschema:"the issue's number"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "get_issue", Description: "Get one issue by number."},
		func(_ context.Context, _ *mcp.CallToolRequest, in getIn) (*mcp.CallToolResult, *Issue, error) {
			called("get_issue")
			for _, is := range Issues {
				if is.Number == in.Number {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("#%d %s", is.Number, is.Title)},
						&mcp.TextContent{Text: "state: " + is.State}}}, &is, nil
				}
			}
			// A tool error: the model reads it and may try another number.
			return nil, nil, fmt.Errorf("there is no issue #%d", in.Number)
		})
	type slowIn struct {
		MS int `json:"ms" jsonschema:"how long to work, in milliseconds"`
	}
	// Idempotent: working again changes nothing, so a call the server
	// took before it died is sent again (the delivery rule).
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Work for a while, reporting progress.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			called("slow")
			const steps = 4
			for i := range steps {
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Message: fmt.Sprintf("step %d of %d", i+1, steps), Progress: float64(i), Total: steps})
				}
				select {
				case <-time.After(time.Duration(in.MS) * time.Millisecond / steps):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("worked for %d ms", in.MS)}}}, nil, nil
		})
	return s
}

// Handler serves the issue tracker over Streamable HTTP, refusing requests
// without the bearer token when opts.Token is set.
func Handler(opts Options) http.Handler {
	s := Server(opts)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: opts.Stateless})
	if opts.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+opts.Token {
			http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HTTPServer is the issue tracker on a loopback port that a test can kill
// and start again on the same port, as a server that crashes and restarts.
type HTTPServer struct {
	// URL is the MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL string
	// Crashable is the HTTP server: its Addr, Kill and Restart (which
	// starts with new sessions: what the killed server knew is gone).
	*Crashable
	opts  Options
	calls sync.Map // tool → *atomic.Int32
}

// StartHTTP serves the issue tracker until the test ends.
func StartHTTP(t testing.TB, opts Options) *HTTPServer {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Start serves the issue tracker on a free loopback port until Kill.
func Start(opts Options) (*HTTPServer, error) {
	s := &HTTPServer{opts: opts}
	var err error
	if s.Crashable, err = StartCrashable(s.handler); err != nil {
		return nil, err
	}
	s.URL = "http://" + s.Addr + "/mcp"
	return s, nil
}

// handler is the server's handler, made anew for each start.
func (s *HTTPServer) handler() http.Handler {
	opts := s.opts
	onCall := opts.OnCall
	opts.OnCall = func(tool string) {
		n, _ := s.calls.LoadOrStore(tool, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if onCall != nil {
			onCall(tool)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(opts))
	return mux
}

// Calls is how many calls of tool the server has started, across restarts.
func (s *HTTPServer) Calls(tool string) int {
	n, ok := s.calls.Load(tool)
	if !ok {
		return 0
	}
	return int(n.(*atomic.Int32).Load())
}

// Crashable is an HTTP server on a loopback port that can crash (Kill)
// and come back on the same address (Restart), serving what newHandler
// makes each time it starts.
type Crashable struct {
	// Addr is host:port.
	Addr       string
	newHandler func() http.Handler

	mu  sync.Mutex
	srv *http.Server
}

// StartCrashable serves newHandler's handler on a free loopback port.
func StartCrashable(newHandler func() http.Handler) (*Crashable, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	c := &Crashable{Addr: ln.Addr().String(), newHandler: newHandler}
	c.serve(ln)
	return c, nil
}

func (c *Crashable) serve(ln net.Listener) {
	srv := &http.Server{Handler: c.newHandler(), ReadHeaderTimeout: 5 * time.Second}
	c.mu.Lock()
	c.srv = srv
	c.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Kill closes the listener and every connection at once, calls in flight
// included, as a crashed server would.
func (c *Crashable) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv != nil {
		_ = c.srv.Close()
		c.srv = nil
	}
}

// Restart serves again on the same address, with a new handler.
func (c *Crashable) Restart() error {
	var ln net.Listener
	var err error
	// The old listener's port is free once Close returned; retry briefly
	// in case the kernel is slow to let go.
	for range 50 {
		if ln, err = net.Listen("tcp", c.Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", c.Addr, err)
	}
	c.serve(ln)
	return nil
}

// Files is the file reader as an MCP server: list_files and read_file over
// the files under root, and environment, which says which variables the
// server was started with (names, and the SHA-256 of each value, so that
// a test can check a value without it being shown).
func Files(root string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Description: "List the files."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			entries, err := os.ReadDir(root)
			if err != nil {
				return nil, nil, err
			}
			var names []string
			for _, e := range entries {
				if e.Type().IsRegular() {
					names = append(names, e.Name())
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(names, "\n")}}}, nil, nil
		})
	type readIn struct {
		Path string `json:"path" jsonschema:"the file's name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			if !filepath.IsLocal(in.Path) {
				return nil, nil, fmt.Errorf("%q is not a file under the root", in.Path)
			}
			b, err := os.ReadFile(filepath.Join(root, in.Path))
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, fmt.Errorf("no file %q", in.Path)
			} else if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	type envOut struct {
		Names  []string          `json:"names"`
		SHA256 map[string]string `json:"sha256"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "environment", Description: "Say which environment variables the server has."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, envOut, error) {
			out := envOut{SHA256: map[string]string{}}
			for _, kv := range os.Environ() {
				name, value, _ := strings.Cut(kv, "=")
				out.Names = append(out.Names, name)
				sum := sha256.Sum256([]byte(value))
				out.SHA256[name] = hex.EncodeToString(sum[:])
			}
			slices.Sort(out.Names)
			return nil, out, nil
		})
	return s
}

// BuildStdio builds the stdio file server (./stdio) into a folder of the
// test's and returns the executable's absolute path.
func BuildStdio(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcp-files")
	cmd := exec.Command("go", "build", "-o", out, "github.com/agentflow/agentflow/internal/tools/mcptest/stdio")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcptest: build the stdio server: %v\n%s", err, b)
	}
	return out
}

// SHA256 is the hex SHA-256 of s, as environment reports values.
func SHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
