package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// derivedCatalog is the HTTP tests' tenant demo with its assistant served
// over AG-UI and A2A too.
var derivedCatalog = strings.Replace(httpCatalogs[0], "    tools: [calculator]\n", "    tools: [calculator]\n    expose: [ag_ui, a2a]\n", 1)

// TestDerivedIDsAtEveryDoor: an id reserved for the ids doors derive
// ("af:…": a Telegram update's turn, a person's session, an MCP call, a
// schedule's runs) is refused as a client's job id or session id at
// every door that takes one — the HTTP API, its SSE route, the OpenAI
// API's Idempotency-Key and session header, the AI SDK's chat id,
// AG-UI's runId and threadId, A2A's contextId — with a 400 (A2A:
// invalid params) that says why, and nothing starts.
func TestDerivedIDsAtEveryDoor(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Catalogs = []string{derivedCatalog, httpCatalogs[1]} })
	job := agent.KeyedID(agent.ChannelTelegram, []byte("a secret"), "demo", "assistant", "tg", "7")
	session := agent.DerivedID(agent.ChannelTelegram, "assistant", "tg", "42", "42")
	const why = `begins with \"af:\", which is reserved`
	post := func(path string, header map[string]string, body string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.user)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	chat := `{"model":"assistant","messages":[{"role":"user","content":"What is 1 + 1?"}]}`
	agui := func(thread, run string) string {
		return `{"threadId":"` + thread + `","runId":"` + run + `","state":{},"tools":[],"context":[],"forwardedProps":{},` +
			`"messages":[{"id":"m1","role":"user","content":"What is 1 + 1?"}]}`
	}
	for _, tt := range []struct {
		name, path string
		header     map[string]string
		body       string
	}{
		{"HTTP Start", "/v1/turns", nil, `{"job_id":"` + job + `","prompt":"What is 1 + 1?"}`},
		{"HTTP Invoke", "/v1/turns:invoke", nil, `{"job_id":"` + job + `","prompt":"What is 1 + 1?"}`},
		{"HTTP Invoke in a session", "/v1/turns:invoke", nil, `{"session_id":"` + session + `","prompt":"What is 1 + 1?"}`},
		{"SSE", "/v1/turns:stream", nil, `{"job_id":"` + job + `","prompt":"What is 1 + 1?"}`},
		{"HTTP SendMessage to the session", "/v1/conversations/" + session + "/messages", nil, `{"prompt":"What did they say?"}`},
		{"HTTP SendMessage with the job id", "/v1/conversations/mine-" + testserver.RandomID() + "/messages", nil, `{"job_id":"` + job + `","prompt":"What is 1 + 1?"}`},
		{"HTTP fork into the session", "/v1/conversations/mine:fork", nil, `{"new_session_id":"` + session + `"}`},
		{"OpenAI Idempotency-Key", "/v1/chat/completions", map[string]string{"Idempotency-Key": job}, chat},
		{"OpenAI session", "/v1/chat/completions", map[string]string{"X-Agentflow-Session": session}, chat},
		{"AI SDK chat id", "/v1/ui/chat", nil, uiBody(t, session, "assistant", userMessage("What is 1 + 1?"))},
		{"AG-UI runId", "/ag-ui/assistant", map[string]string{"Accept": "text/event-stream"}, agui("t-"+testserver.RandomID(), job)},
		{"AG-UI runId without a thread", "/ag-ui/assistant", map[string]string{"Accept": "text/event-stream"}, agui("", job)},
		{"AG-UI threadId", "/ag-ui/assistant", map[string]string{"Accept": "text/event-stream"}, agui(session, "r-"+testserver.RandomID())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(tt.path, tt.header, tt.body)
			require.Equal(t, http.StatusBadRequest, code, body)
			require.Contains(t, body, why)
		})
	}
	t.Run("A2A contextId", func(t *testing.T) {
		code, body := post("/a2a/assistant", map[string]string{"A2A-Version": "1.0"},
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","contextId":"`+session+
				`","parts":[{"text":"What is 1 + 1?"}]}}}`)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"code":-32602`)
		require.Contains(t, body, why)
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range []string{contract.TurnWorkflowID("demo", job), contract.ConversationWorkflowID("demo", session)} {
		_, err := e.Client().DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		require.ErrorAs(t, err, &nf, "%s started", id)
	}
}
