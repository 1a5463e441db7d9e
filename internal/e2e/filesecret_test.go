package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/testserver"
)

// fileSecretScript has the model call the API through execute_pipeline,
// or through the tool whose secret file is missing, and answer with what
// the tool gave it. API_URL stands for the API's URL.
const fileSecretScript = `
rules:
  - name: good
    when: {user: '(?i)^ask the crm'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API_URL/contacts"}]}'
  - name: broken
    when: {user: '(?i)^ask with the missing key'}
    reply:
      tool_calls:
        - name: broken_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API_URL/contacts"}]}'
  - name: answer
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'The tool gave: $1'}
`

// fileSecretCatalog names the API's key by a mounted file (SECRET_REF),
// and a second tool a file that is not there (MISSING_REF), without the
// tenant's cache, which would answer its call with the first one's
// result. API_HOST stands for the API's host:port.
const fileSecretCatalog = `
tenant: demo
default_agent: crm
egress: ["API_HOST"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config:
      credentials:
        - {host: "API_HOST", header: X-Api-Key, secret: "SECRET_REF"}
  - name: broken_pipeline
    kind: execute_pipeline
    config:
      cache_ttl_sec: 0
      credentials:
        - {host: "API_HOST", header: X-Api-Key, secret: "MISSING_REF"}
agents:
  - id: crm
    model: openai:gpt-4o-mini
    tools: [execute_pipeline, broken_pipeline]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestFileSecret: a tool's credential named file:/… is read from the
// mounted file, less its line break, when the call is made, and sent to
// the API, which checks it and echoes it back; the model reads the
// placeholder, and the value is in no history, table, log or result. A
// file that is not there fails the call, naming the reference.
func TestFileSecret(t *testing.T) {
	key := "crm-key-" + testserver.RandomID() + testserver.RandomID()
	dir := t.TempDir()
	ref := "file:" + filepath.Join(dir, "crm-token")
	missing := "file:" + filepath.Join(dir, "not-mounted")
	require.NoError(t, os.WriteFile(strings.TrimPrefix(ref, "file:"), []byte(key+"\n"), 0o600))

	var mu sync.Mutex
	var keyed, unkeyed int
	api := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Api-Key") != key {
			unkeyed++
			http.Error(w, `{"error": "bad key"}`, http.StatusUnauthorized)
			return
		}
		keyed++
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]map[string]string{{"name": "Ann", "seen_key": r.Header.Get("X-Api-Key")}})
	}))
	grants, err := secrets.ParseGrants("demo=file:" + dir + "/*")
	require.NoError(t, err)
	logger, log := keptLog(t, zap.WarnLevel)
	catalog := strings.NewReplacer("API_HOST", strings.TrimPrefix(api.URL, "http://"), "SECRET_REF", ref, "MISSING_REF", missing).Replace(fileSecretCatalog)
	srv := testserver.Start(t, testserver.Options{
		Script:       strings.ReplaceAll(fileSecretScript, "API_URL", api.URL),
		Catalogs:     []string{catalog},
		Logger:       logger,
		SecretGrants: &grants,
	})
	e := &dataEnv{env: &env{Server: srv, t: t}, key: key, log: log}

	res, _ := e.run(agent.TurnRequest{JobID: "crm-" + testserver.RandomID(), Prompt: "ask the crm for contacts"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	mu.Lock()
	require.Equal(t, []int{1, 0}, []int{keyed, unkeyed}, "the API got the file's content, without its line break")
	mu.Unlock()
	require.Contains(t, res.Output, `"seen_key":"[secret `+ref+`]"`, "the model reads the placeholder")
	requireNoKey(t, res, key)

	res, _ = e.run(agent.TurnRequest{JobID: "missing-" + testserver.RandomID(), Prompt: "ask with the missing key"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res)
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, res.Output, "secret "+missing+": the file does not exist")
	mu.Lock()
	require.Equal(t, []int{1, 0}, []int{keyed, unkeyed}, "no request goes out without its credential")
	mu.Unlock()

	e.requireNoSecret(key)
}
