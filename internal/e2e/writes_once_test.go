package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// writesDoc is the document of writesAPI: writes that deduplicate
// nothing (createBooking, createCharge, createRefund), one that declares
// an Idempotency-Key (createPayment), and a PUT (holdSeat).
const writesDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "Bookings", "version": "1"},
  "paths": {
    "/bookings": {"post": {"operationId": "createBooking", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
      "responses": {"201": {"description": "booked"}}}},
    "/charges": {"post": {"operationId": "createCharge", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
      "responses": {"201": {"description": "charged"}}}},
    "/refunds": {"post": {"operationId": "createRefund", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
      "responses": {"201": {"description": "refunded"}}}},
    "/payments": {"post": {"operationId": "createPayment",
      "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
      "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
      "responses": {"201": {"description": "paid"}}}},
    "/seats/{seat}": {"put": {"operationId": "holdSeat", "parameters": [{"name": "seat", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "held"}}}}
  }
}`

// writesAPI counts every request by path, never deduplicates, and makes
// the first request of each path fail as the test says: hang past the
// tool's timeout (the attempt is timed out, as one whose worker was lost,
// and Temporal runs another), or answer 503.
type writesAPI struct {
	*httptest.Server
	mu    sync.Mutex
	count map[string]int
	keys  map[string][]string // Idempotency-Key headers sent, by path
	first map[string]string   // path → "hang" | "503"
}

func startWritesAPI(t *testing.T, first map[string]string) *writesAPI {
	t.Helper()
	a := &writesAPI{count: map[string]int{}, keys: map[string][]string{}, first: first}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(writesDoc))
			return
		}
		path := r.URL.Path
		if strings.HasPrefix(path, "/seats/") {
			path = "/seats"
		}
		a.mu.Lock()
		a.count[path]++
		n := a.count[path]
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			a.keys[path] = append(a.keys[path], k)
		}
		how := a.first[path]
		a.mu.Unlock()
		if n == 1 {
			switch how {
			case "hang":
				// Past the tool's 2 s: the attempt times out with the
				// request in flight, and this answer goes nowhere.
				select {
				case <-time.After(6 * time.Second):
				case <-r.Context().Done():
				}
			case "503":
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"try later"}`))
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true,"n":` + string(rune('0'+n)) + `}`))
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *writesAPI) counted(path string) (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count[path], append([]string(nil), a.keys[path]...)
}

const writesScript = `
rules:
  - when: {tool: '(?s)^(.*)$'}
    reply: {text: 'The tool said: $1'}
  - when: {user: '^call api holdSeat$'}
    reply: {tool_calls: [{name: api, arguments: '{"operation_id": "holdSeat", "params": {"seat": "12A"}}'}]}
  - when: {user: '^call api (\w+)$'}
    reply: {tool_calls: [{name: api, arguments: '{"operation_id": "$1", "body": {"item": 1}}'}]}
  - when: {user: '^call api_dedup (\w+)$'}
    reply: {tool_calls: [{name: api_dedup, arguments: '{"operation_id": "$1", "body": {"item": 1}}'}]}
`

// writesCatalog: api delivers at most once (the default); api_dedup is
// the same API, said to deduplicate (delivery: idempotent). Both run
// each attempt for at most 2 s.
const writesCatalog = `
tenant: demo
default_agent: booker
egress: ["HOST"]
tools:
  - {name: api, kind: openapi_action, approval: never, timeout_sec: 2, config: {spec_url: URL/openapi.json}}
  - {name: api_dedup, kind: openapi_action, approval: never, timeout_sec: 2, delivery: idempotent, config: {spec_url: URL/openapi.json}}
agents:
  - {id: booker, model: "openai:gpt-4o-mini", system_prompt: You book., tools: [api, api_dedup]}
`

// TestWritesOnce: a write whose attempt is lost in flight (timed out
// with its request sent, as when its worker dies or is cut off) is not
// sent again unless the far side deduplicates it: a POST the API cannot
// deduplicate reaches it once and the call's outcome is unknown, which
// the model is told with the call and what to do; a write that declares
// an Idempotency-Key, a PUT, and a tool the catalog says is idempotent
// are sent again (with one key); a write answered 503 is the call's
// error, not retried.
func TestWritesOnce(t *testing.T) {
	api := startWritesAPI(t, map[string]string{"/bookings": "hang", "/payments": "hang", "/seats": "hang", "/refunds": "hang", "/charges": "503"})
	catalog := strings.NewReplacer("URL", api.URL, "HOST", strings.TrimPrefix(api.URL, "http://")).Replace(writesCatalog)
	srv := testserver.Start(t, testserver.Options{Script: writesScript, Catalogs: []string{catalog},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	turn := func(prompt string) (agent.TurnResult, agent.Message) {
		t.Helper()
		job := "writes-" + testserver.RandomID()
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", JobID: job, Prompt: prompt})
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		require.Len(t, res.Metadata.ToolCalls, 1)
		steps, err := srv.Store().Steps(ctx, "demo", job)
		require.NoError(t, err)
		for _, s := range steps {
			if s.Role == agent.RoleTool {
				return res, s
			}
		}
		t.Fatalf("turn %s stored no tool result", job)
		return res, agent.Message{}
	}

	// At most once: sent once, the outcome unknown, and the model told so.
	res, step := turn("call api createBooking")
	n, _ := api.counted("/bookings")
	require.Equal(t, 1, n, "the booking reached the API once")
	require.Equal(t, agent.ToolUnknown, res.Metadata.ToolCalls[0].Status)
	require.True(t, strings.HasPrefix(step.Content, "unknown outcome: "), step.Content)
	var told struct {
		Outcome   string          `json:"outcome"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		What      string          `json:"what"`
		Advice    string          `json:"advice"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(step.Content, "unknown outcome: ")), &told))
	require.Equal(t, "unknown", told.Outcome)
	require.Equal(t, "api", told.Tool)
	require.Contains(t, string(told.Arguments), "createBooking")
	require.Contains(t, told.What, "POST "+api.URL+"/bookings")
	require.Contains(t, told.Advice, "may or may not have taken effect")
	require.Contains(t, res.Output, "The tool said: unknown outcome:")

	// Deduplicated by the far side: sent again, with one key.
	for _, c := range []struct{ prompt, path string }{
		{"call api createPayment", "/payments"},
		{"call api holdSeat", "/seats"},
		{"call api_dedup createRefund", "/refunds"},
	} {
		res, _ := turn(c.prompt)
		n, keys := api.counted(c.path)
		require.Equal(t, 2, n, "%s was sent again", c.path)
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status, c.path)
		if c.path != "/seats" {
			require.Len(t, keys, 2, c.path)
			require.Equal(t, keys[0], keys[1], "%s: one key on every attempt", c.path)
		}
	}

	// Answered 503: the call's error, not sent again.
	res, step = turn("call api createCharge")
	n, _ = api.counted("/charges")
	require.Equal(t, 1, n, "the charge was not sent again")
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, step.Content, "503")
	require.Contains(t, step.Content, "not sent again")
}

// dropFirstCalls serves h, an MCP server, but breaks the connection of
// the first tools/call of each tool after reading it: the server got the
// request, the client never gets an answer. It counts every tools/call by
// tool.
type dropFirstCalls struct {
	h     http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func (d *dropFirstCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
		d.mu.Lock()
		d.calls[msg.Params.Name]++
		n := d.calls[msg.Params.Name]
		d.mu.Unlock()
		if n == 1 {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	d.h.ServeHTTP(w, r)
}

func (d *dropFirstCalls) count(tool string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[tool]
}

// TestMCPWritesOnce: a tools/call whose connection breaks after the
// server took it is not sent again, and its outcome is unknown; one of a
// tool the server annotates read-only is sent again and answered.
func TestMCPWritesOnce(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bookings", Version: "v1"}, nil)
	type args struct {
		Flight string `json:"flight"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "book", Description: "Book a seat."},
		func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "booked " + in.Flight}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Look a booking up.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found " + in.Flight}}}, nil, nil
		})
	drop := &dropFirstCalls{h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), calls: map[string]int{}}
	api := httptest.NewServer(drop)
	defer api.Close()
	catalog := strings.NewReplacer("URL", api.URL, "HOST", strings.TrimPrefix(api.URL, "http://")).Replace(`
tenant: demo
default_agent: booker
egress: ["HOST"]
tools:
  - {name: air, kind: mcp, approval: never, config: {url: URL, tools: [book, lookup]}}
agents:
  - {id: booker, model: "openai:gpt-4o-mini", system_prompt: You book., tools: [air]}
`)
	script := `
rules:
  - when: {tool: '(?s)^(.*)$'}
    reply: {text: 'The tool said: $1'}
  - when: {user: '^book AF1$'}
    reply: {tool_calls: [{name: air_book, arguments: '{"flight": "AF1"}'}]}
  - when: {user: '^lookup AF1$'}
    reply: {tool_calls: [{name: air_lookup, arguments: '{"flight": "AF1"}'}]}
`
	srv := testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{catalog},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	turn := func(prompt string) agent.TurnResult { return oneCallTurn(ctx, t, srv, "mcp-writes-", prompt) }

	res := turn("book AF1")
	require.Equal(t, 1, drop.count("book"), "the booking reached the server once")
	require.Equal(t, agent.ToolUnknown, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, res.Output, "The tool said: unknown outcome:")
	require.Contains(t, res.Output, "to call book")

	res = turn("lookup AF1")
	require.Equal(t, 2, drop.count("lookup"), "a read-only call is sent again")
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, res.Output, "found AF1")
}

// oneCallTurn runs a turn of the demo tenant on srv and returns its
// result, which must be completed with one tool call.
func oneCallTurn(ctx context.Context, t *testing.T, srv *testserver.Server, jobPrefix, prompt string) agent.TurnResult {
	t.Helper()
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
		TenantID: "demo", JobID: jobPrefix + testserver.RandomID(), Prompt: prompt})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Len(t, res.Metadata.ToolCalls, 1)
	return res
}
