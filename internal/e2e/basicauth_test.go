package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// basicAuthScript has the model ask the API who it is, and answer with
// all the tool gave it.
const basicAuthScript = `
rules:
  - name: whoami
    when: {user: '(?i)who am i'}
    reply:
      tool_calls: [{name: account, arguments: '{"operation_id": "whoAmI"}'}]
  - name: answer
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'The tool gave: $1'}
`

// basicAuthCatalog gives the agent the API through openapi_action, its
// document inline, with a basic login from the worker's environment.
// API_URL and API_HOST stand for the API's URL and host:port.
const basicAuthCatalog = `
tenant: demo
default_agent: account
egress: ["API_HOST"]
tools:
  - name: account
    kind: openapi_action
    config:
      server: API_URL
      auth: [{type: basic, secret: "env:TEST_BASIC_LOGIN"}]
      spec:
        openapi: 3.0.3
        info: {title: Accounts, version: "1"}
        paths:
          /whoami:
            get:
              operationId: whoAmI
              responses:
                "200":
                  description: who the caller is
                  content: {application/json: {schema: {type: object}}}
agents:
  - id: account
    model: openai:gpt-4o-mini
    tools: [account]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestBasicPasswordKeptNowhere is finding 2 of the fourth trust review on
// the real stack: an API that decodes the basic login it was sent and
// answers with the password — as it is, and in the other forms an echo
// gives it (upper case, hex, base64 behind a prefix, split in halves
// across two fields) — gives the model the login's placeholder; the
// password is in no workflow history, no table (turn_steps,
// agent_results, cas_blobs and the rest), no event a tenant reads
// (tool_end's data sample), no log line and no result.
func TestBasicPasswordKeptNowhere(t *testing.T) {
	pass := "Pw-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_BASIC_LOGIN", "ada:"+pass)
	var logins atomic.Int32
	api := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		if !ok || user != "ada" || pw != pass {
			http.Error(w, `{"error": "bad login"}`, http.StatusUnauthorized)
			return
		}
		logins.Add(1)
		h := len(pw) / 2
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"user": user, "password": pw, "upper": strings.ToUpper(pw), "hex": hex.EncodeToString([]byte(pw)),
			"token": base64.StdEncoding.EncodeToString([]byte("v1." + pw)), "first": pw[:h], "second": pw[h:],
		})
	}))
	logger, log := keptLog(t, zap.WarnLevel)
	catalog := strings.NewReplacer("API_URL", api.URL, "API_HOST", strings.TrimPrefix(api.URL, "http://")).Replace(basicAuthCatalog)
	srv := testserver.Start(t, testserver.Options{Script: basicAuthScript, Catalogs: []string{catalog}, Logger: logger})
	e := &dataEnv{env: &env{Server: srv, t: t}, key: pass, log: log}

	res, id := e.run(agent.TurnRequest{JobID: "whoami-" + testserver.RandomID(), SessionID: "s-" + testserver.RandomID(), Prompt: "who am I?"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	require.EqualValues(t, 1, logins.Load(), "the API got the login")
	require.Contains(t, res.Output, `"password":"[secret env:TEST_BASIC_LOGIN]"`, "the model reads the placeholder")
	require.Contains(t, res.Output, `"user":"ada"`, "the user name is no secret")
	requireNoKey(t, res, pass)

	// The tool_end event, which every user of the tenant reads, holds the
	// placeholder in its data.
	page, err := turnclient.Events(context.Background(), e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	var ended bool
	for _, ev := range page.Events {
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(string(raw)), strings.ToLower(pass), "event %d (%s)", ev.Index, ev.Kind)
		if ev.Kind == agent.EventToolEnd {
			ended = true
			require.Contains(t, string(raw), "[secret env:TEST_BASIC_LOGIN]")
		}
	}
	require.True(t, ended, "a tool_end event")

	e.requireNoSecret(pass)
	for _, half := range []string{pass[:len(pass)/2], pass[len(pass)/2:]} {
		e.requireNoSecret(half)
	}
}
