package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
)

// platformPortsScript has the model fetch the URL it is asked to, and
// answer with what the tool gave it.
const platformPortsScript = `
rules:
  - name: fetch
    when: {user: '^fetch (?P<url>\S+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "${url}"}]}'
  - name: answer
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'The tool gave: $1'}
`

// platformPortsCatalog lets the tenant reach all of loopback, as far as
// the operator opens it.
const platformPortsCatalog = `
tenant: demo
default_agent: fetcher
egress: ["127.0.0.0/8"]
tools:
  - {name: execute_pipeline, kind: execute_pipeline, config: {cache_ttl_sec: 0}}
agents:
  - id: fetcher
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestPlatformListenersClosed is finding 7 of the fourth trust review: with
// an operator allowlist of 127.0.0.0/8 (the test server's), a tenant that
// lists loopback reaches none of the listeners the dev stack started —
// the Temporal dev server's metrics, on a port no setting names, its
// internal services', its frontend's and Postgres's — while a server of
// the test's own on loopback it does reach.
func TestPlatformListenersClosed(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Script: platformPortsScript, Catalogs: []string{platformPortsCatalog}})
	e := &dataEnv{env: &env{Server: srv, t: t}}
	fetch := func(url string) agent.TurnResult {
		t.Helper()
		res, _ := e.run(agent.TurnRequest{JobID: "fetch-" + testserver.RandomID(), Prompt: "fetch " + url})
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res)
		return res
	}

	addrs := devtest.PlatformAddrs(t)
	// One of them serves the dev server's metrics: the port of the finding.
	var metrics string
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, a := range addrs {
		resp, err := hc.Get("http://" + a + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "# TYPE ") {
			metrics = a
		}
	}
	require.NotEmpty(t, metrics, "the dev stack reports its metrics listener among %v", addrs)
	require.Greater(t, len(addrs), 4, "the frontend's two APIs, the metrics, the internal services' ports and Postgres: %v", addrs)

	for _, a := range addrs {
		t.Run(a, func(t *testing.T) {
			res := fetch("http://" + a + "/metrics")
			require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status, res.Output)
			require.Contains(t, res.Output, "a port of the platform's own, which no egress policy opens")
			require.NotContains(t, res.Output, "# TYPE")
		})
	}

	// Loopback is open all the same: a server of the test's own answers.
	own := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": "yes, the test's own"}`))
	}))
	res := fetch(own.URL + "/metrics")
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status, res.Output)
	require.Contains(t, res.Output, "yes, the test's own")
}
