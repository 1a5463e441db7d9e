package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// piiScript: the model reads the prompt as redacted — it matches only
// placeholders — and asks the notify tool to write to the placeholder.
const piiScript = `
pacing: {chunk_words: 1, delay_ms: 2}
rules:
  - name: notify
    when: {user: '(?i)^email me at (\[EMAIL_\d+\]) about card (\[CARD_\d+\])'}
    reply: {tool_calls: [{name: notify, arguments: '{"session_id": "pii", "pipeline": [{"step": "http_request", "url": "NOTIFY_URL", "params": {"to": "$1"}}]}'}]}
  - name: done
    when: {tool: '(?s)(\[EMAIL_\d+\])'}
    reply: {text: 'I wrote to $1.'}
  - name: other
    reply: {text: 'I cannot tell.'}
`

const piiCatalog = `
tenant: demo
default_agent: clerk
egress: ["NOTIFY_HOST"]
pii: {mode: placeholder, reveal: [notify]}
tools:
  - name: notify
    kind: execute_pipeline
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [notify]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
`

// TestPIIRedaction: an email and a card number in a prompt never reach
// the model, the tables, the workflow's history, the logs or the spans
// (content tracing on, the worst case), while the tool the tenant allows
// gets the real email from the vault, and what it returns is redacted
// again before the model reads it.
func TestPIIRedaction(t *testing.T) {
	const email, card = "ana.lopez@example.com", "4111 1111 1111 1111"
	var mu sync.Mutex
	var received []string
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.URL.Query().Get("to"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		// The service echoes the address: the output must be redacted.
		_ = json.NewEncoder(w).Encode([]map[string]string{{"delivered_to": r.URL.Query().Get("to"), "status": "sent"}})
	}))
	defer notify.Close()
	host := strings.TrimPrefix(notify.URL, "http://")
	tp, rec := newTracing(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = strings.ReplaceAll(piiScript, "NOTIFY_URL", notify.URL+"/notify")
		o.Catalogs = []string{strings.ReplaceAll(piiCatalog, "NOTIFY_HOST", host)}
		o.VaultKey, o.TracerProvider, o.TraceContent = key, tp, true
		o.EgressAllow = []string{"127.0.0.0/8"}
	})

	session := "pii-" + testserver.RandomID()
	prompt := fmt.Sprintf("Email me at %s about card %s, please.", email, card)
	var res pb.TurnResult
	e.ok("POST", "/v1/turns:invoke", e.user, `{"session_id": "`+session+`", "prompt": "`+prompt+`"}`, &res)
	require.Equal(t, "I wrote to [EMAIL_1].", res.GetOutput())
	mu.Lock()
	require.Equal(t, []string{email}, received, "the allowed tool got the real address")
	mu.Unlock()

	secrets := []string{email, card, "4111111111111111"}
	clean := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, text, s, "%s holds %q", where, s)
		}
	}
	// The model.
	reqs := e.Model.Requests()
	require.NotEmpty(t, reqs)
	raw, err := json.Marshal(reqs)
	require.NoError(t, err)
	clean("the model's requests", string(raw))
	require.Contains(t, string(raw), "Email me at [EMAIL_1] about card [CARD_1], please.")

	// The tables: every row of every table, as text.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := e.Store().Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, tables, "session_messages")
	for _, table := range tables {
		var dump string
		require.NoError(t, e.Store().Pool().QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(string_agg(t::text, E'\n'), '') FROM %q t`, table)).Scan(&dump))
		clean("table "+table, dump)
	}
	var transcript string
	require.NoError(t, e.Store().Pool().QueryRow(ctx, `SELECT string_agg(message::text, ' ') FROM session_messages WHERE session_id = $1`, session).Scan(&transcript))
	require.Contains(t, transcript, "[EMAIL_1]")

	// The workflow's history, the logs, the spans.
	hist, err := protojson.Marshal(&historypb.History{Events: testserver.History(ctx, t, e.Client(), contract.TurnWorkflowID("demo", res.GetJobId()), "")})
	require.NoError(t, err)
	clean("the history", string(hist))
	clean("the logs", string(e.log.Bytes()))
	spans := rec.await("RunWorkflow:" + contract.AgentTurn)
	require.NotEmpty(t, spans)
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			clean("span "+sp.Name+" attribute "+string(kv.Key), kv.Value.String())
		}
	}
}
