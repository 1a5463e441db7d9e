package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
)

// outboundScript has the model call execute_pipeline on the echoing API
// (ECHO_URL stands for its URL), and answer with all the tool gave it.
const outboundScript = `
rules:
  - name: echo
    when: {user: '(?i)what does the API see'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "ECHO_URL/echo", "params": {"q": "hello"}}]}'
  - name: away
    when: {user: '(?i)follow the API away'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "ECHO_URL/away"}]}'
  - name: answer
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'The tool gave: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// outboundCatalog lets the agent reach the API and a second host, and
// gives execute_pipeline the API's key, from the worker's environment.
// ECHO_HOST and OTHER_HOST stand for their host:port.
const outboundCatalog = `
tenant: demo
default_agent: echo
egress: ["ECHO_HOST", "OTHER_HOST"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config:
      cache_ttl_sec: 300
      credentials:
        - {host: "ECHO_HOST", header: X-Api-Key, secret: "env:TEST_ECHO_KEY"}
        - {host: "ECHO_HOST", query: api_key, secret: "env:TEST_ECHO_KEY"}
agents:
  - id: echo
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// echoingAPI echoes every header and query parameter it gets, as rows
// and in a response header, and redirects /away to a second host on
// another address, which records what it gets.
type echoingAPI struct {
	api, other *httptest.Server
	mu         sync.Mutex
	keys       int // requests to the API that carried the key
	otherGot   []string
}

func startEchoingAPI(t *testing.T, key string) *echoingAPI {
	t.Helper()
	e := &echoingAPI{}
	e.other = listenOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.otherGot = append(e.otherGot, r.URL.String()+" "+fmt.Sprint(r.Header))
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"stolen": "nothing"}]`)
	}))
	e.api = listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		if r.Header.Get("X-Api-Key") == key && r.URL.Query().Get("api_key") == key {
			e.keys++
		}
		e.mu.Unlock()
		if r.URL.Path == "/away" {
			http.Redirect(w, r, e.other.URL+"/steal", http.StatusFound)
			return
		}
		var rows []map[string]string
		for name, vs := range r.Header {
			rows = append(rows, map[string]string{"from": "header", "name": name, "value": strings.Join(vs, ", ")})
		}
		for name, vs := range r.URL.Query() {
			rows = append(rows, map[string]string{"from": "query", "name": name, "value": strings.Join(vs, ", ")})
		}
		rows = append(rows, map[string]string{"from": "url", "name": "", "value": r.URL.String()})
		sort.Slice(rows, func(i, j int) bool { return rows[i]["from"]+rows[i]["name"] < rows[j]["from"]+rows[j]["name"] })
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Your-Key", r.Header.Get("X-Api-Key"))
		_ = json.NewEncoder(w).Encode(rows)
	}))
	return e
}

func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
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

// TestEchoedSecretIsKeptNowhere is findings 5 and 6 of the trust review
// on the real stack: an API that echoes the key it was sent (in a header
// and in the query) gives the model the key's placeholder, and the key is
// in no workflow history, no table, no log line and no result; a redirect
// from the API to a second host is not followed, and that host sees no
// credential.
func TestEchoedSecretIsKeptNowhere(t *testing.T) {
	key := "echo-key-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_ECHO_KEY", key)
	api := startEchoingAPI(t, key)
	logger, log := keptLog(t, zap.WarnLevel)
	hosts := strings.NewReplacer("ECHO_HOST", strings.TrimPrefix(api.api.URL, "http://"), "OTHER_HOST", strings.TrimPrefix(api.other.URL, "http://"))
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(outboundScript, "ECHO_URL", api.api.URL),
		Catalogs: []string{hosts.Replace(outboundCatalog)},
		Logger:   logger,
	})
	e := &dataEnv{env: &env{Server: srv, t: t}, key: key, log: log}

	res, _ := e.run(agent.TurnRequest{JobID: "echo-" + testserver.RandomID(), SessionID: "s-" + testserver.RandomID(), Prompt: "what does the API see?"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res)
	api.mu.Lock()
	require.Equal(t, 1, api.keys, "the API got its key, in the header and the query")
	api.mu.Unlock()
	require.Contains(t, res.Output, "The tool gave: The pipeline's 1 step gave a table of")
	require.Contains(t, res.Output, `"value":"[secret env:TEST_ECHO_KEY]"`, "the model reads the placeholder")
	requireNoKey(t, res, key)

	// The same question again: from the tenant's cache, which holds the
	// placeholder too.
	res, _ = e.run(agent.TurnRequest{JobID: "again-" + testserver.RandomID(), Prompt: "what does the API see?"})
	require.True(t, res.Metadata.CacheHit)
	require.Contains(t, res.Output, `[secret env:TEST_ECHO_KEY]`)
	requireNoKey(t, res, key)

	// A redirect to the second host is not followed: the model is told,
	// and the host sees nothing.
	res, _ = e.run(agent.TurnRequest{JobID: "away-" + testserver.RandomID(), Prompt: "follow the API away"})
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Contains(t, res.Output, "302 Found redirects from "+api.api.URL+"/away to "+api.other.URL+"/steal, another host: not followed")
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	requireNoKey(t, res, key)
	api.mu.Lock()
	require.Empty(t, api.otherGot, "the second host gets no request, so no credential")
	api.mu.Unlock()

	e.requireNoSecret(key)
}

// requireNoKey fails when the key is anywhere in a turn's result.
func requireNoKey(t *testing.T, res agent.TurnResult, key string) {
	t.Helper()
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.NotContains(t, string(raw), key)
}
