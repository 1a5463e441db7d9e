package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
)

// reconciledDoc: two writes that deduplicate nothing (createOrder,
// createHold) and the reads that find each by the key it was sent with.
const reconciledDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "Orders", "version": "1"},
  "paths": {
    "/orders": {
      "post": {"operationId": "createOrder", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {"201": {"description": "ordered"}}},
      "get": {"operationId": "findOrders", "parameters": [{"name": "key", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the orders made with the key"}}}},
    "/holds": {
      "post": {"operationId": "createHold", "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {"201": {"description": "held"}}},
      "get": {"operationId": "findHolds", "parameters": [{"name": "key", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the holds made with the key"}}}}
  }
}`

// ordersAPI never deduplicates. The first POST of each path hangs past
// the tool's timeout: an order is stored before it hangs (the write took
// effect, its answer was lost), a hold is not (it was lost before it
// was stored). GET finds what was stored by the Idempotency-Key it came
// with.
type ordersAPI struct {
	*httptest.Server
	mu     sync.Mutex
	posts  map[string]int
	stored map[string][]string // keys stored, by path
}

func startOrdersAPI(t *testing.T) *ordersAPI {
	t.Helper()
	a := &ordersAPI{posts: map[string]int{}, stored: map[string][]string{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi.json" {
			_, _ = w.Write([]byte(reconciledDoc))
			return
		}
		a.mu.Lock()
		if r.Method == http.MethodGet {
			key := r.URL.Query().Get("key")
			items := []map[string]string{}
			if slices.Contains(a.stored[r.URL.Path], key) {
				items = append(items, map[string]string{"key": key, "id": "o-1"})
			}
			a.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"items": items})
			return
		}
		a.posts[r.URL.Path]++
		n := a.posts[r.URL.Path]
		if n > 1 || r.URL.Path == "/orders" {
			a.stored[r.URL.Path] = append(a.stored[r.URL.Path], r.Header.Get("Idempotency-Key"))
		}
		a.mu.Unlock()
		if n == 1 {
			select {
			case <-time.After(6 * time.Second):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"o-1"}`))
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *ordersAPI) counted(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.posts[path]
}

// reconciledCatalog's tool is reconciled: a write whose attempt was lost is
// answered from the read its reconcile makes (the same entry's GET by
// the call's key).
const reconciledCatalog = `
tenant: demo
default_agent: clerk
egress: ["HOST"]
tools:
  - name: orders
    kind: openapi_action
    approval: never
    timeout_sec: 2
    delivery: reconciled
    reconcile:
      arguments: '.key as $key | ({createOrder: "findOrders", createHold: "findHolds"}[.args.operation_id] // empty) | {operation_id: ., params: {key: $key}}'
      found: '.answer.items | length > 0'
    config: {spec_url: URL/openapi.json}
agents:
  - {id: clerk, model: "openai:gpt-4o-mini", system_prompt: You order., tools: [orders]}
`

const reconciledScript = `
rules:
  - when: {tool: '(?s)^(.*)$'}
    reply: {text: 'The tool said: $1'}
  - when: {user: '^call orders (\w+)$'}
    reply: {tool_calls: [{name: orders, arguments: '{"operation_id": "$1", "body": {"item": 1}}'}]}
`

// TestWritesReconciled: a reconciled tool's write whose attempt was lost
// in flight is not sent again; the call is answered from the read its
// catalog entry names — the write's record when it took effect, "not
// made" when it did not — rather than left unknown.
func TestWritesReconciled(t *testing.T) {
	api := startOrdersAPI(t)
	catalog := strings.NewReplacer("URL", api.URL, "HOST", strings.TrimPrefix(api.URL, "http://")).Replace(reconciledCatalog)
	srv := testserver.Start(t, testserver.Options{Script: reconciledScript, Catalogs: []string{catalog},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	turn := func(prompt string) agent.TurnResult { return oneCallTurn(ctx, t, srv, "reconciled-", prompt) }

	res := turn("call orders createOrder")
	require.Equal(t, 1, api.counted("/orders"), "the order reached the API once")
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status, res.Output)
	require.Contains(t, res.Output, "The tool said: reconciled: the write of an earlier attempt took effect")
	require.Contains(t, res.Output, `"id":"o-1"`)

	res = turn("call orders createHold")
	require.Equal(t, 1, api.counted("/holds"), "the hold was not sent again")
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status, res.Output)
	require.Contains(t, res.Output, "not made: the write of an earlier attempt did not take effect")
}
