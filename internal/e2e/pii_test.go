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
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
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

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secrets := []string{email, card, "4111111111111111"}
	clean := e.requireNoneOf(ctx, secrets, contract.TurnWorkflowID("demo", res.GetJobId()))
	raw, err := json.Marshal(e.Model.Requests())
	require.NoError(t, err)
	require.Contains(t, string(raw), "Email me at [EMAIL_1] about card [CARD_1], please.")
	var transcript string
	require.NoError(t, e.Store().Pool().QueryRow(ctx, `SELECT string_agg(message::text, ' ') FROM session_messages WHERE session_id = $1`, session).Scan(&transcript))
	require.Contains(t, transcript, "[EMAIL_1]")

	// The spans.
	spans := rec.await("RunWorkflow:" + contract.AgentTurn)
	require.NotEmpty(t, spans)
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			clean("span "+sp.Name+" attribute "+string(kv.Key), kv.Value.String())
		}
	}
}

// requireNoneOf checks that none of the values is anywhere a turn keeps
// or sends what it was given: the model's requests, every row of every
// table, the histories of the workflows (their payloads as stored, not
// base64) and the logs. It returns the check, for more places.
func (e *httpEnv) requireNoneOf(ctx context.Context, values []string, workflowIDs ...string) func(where, text string) {
	t := e.t
	t.Helper()
	clean := func(where, text string) {
		t.Helper()
		for _, v := range values {
			require.NotContains(t, text, v, "%s holds %q", where, v)
		}
	}
	reqs := e.Model.Requests()
	require.NotEmpty(t, reqs)
	raw, err := json.Marshal(reqs)
	require.NoError(t, err)
	clean("the model's requests", string(raw))

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

	for _, id := range workflowIDs {
		hist, err := proto.Marshal(&historypb.History{Events: testserver.History(ctx, t, e.Client(), id, "")})
		require.NoError(t, err)
		clean("the history of "+id, string(hist))
	}
	clean("the logs", string(e.log.Bytes()))
	return clean
}

// piiTextsScript: the model asks for a phone number and writes back what
// it was told.
const piiTextsScript = `
pacing: {chunk_words: 1, delay_ms: 2}
rules:
  - name: ask
    when: {user: '(?i)^update my details'}
    reply: {tool_calls: [{name: ask_user, arguments: '{"question": "Anything else?"}'}]}
  - name: refund
    when: {user: '(?i)^refund'}
    reply: {tool_calls: [{name: refund, arguments: '{"expression": "1 + 1"}'}]}
  - name: noted
    when: {tool: '(?s)^(.+)$'}
    reply: {text: 'Noted: $1'}
  - name: hello
    reply: {text: 'Hello.'}
`

const piiTextsCatalog = `
tenant: demo
default_agent: clerk
pii: {mode: placeholder}
tools:
  - name: ask_user
    kind: ask_user
  - name: refund
    kind: calculator
    approval: always
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [ask_user, refund]
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 120}
`

// TestPIIRedactionEveryText: every text a request carries is redacted
// where the prompt is — its text parts, the context's user_role, ui_page,
// metadata values and workflow_state strings — and so are an ask_user
// answer, a rejection's reason and a cancellation's, with the turn's
// placeholders, and a message to a conversation with its context: none of
// the values reaches the model, a table (turns, turn_steps, agent_results,
// approvals, …), a workflow's history (a turn's input, the answer's and
// the decision's updates, the cancellation, the message) or the logs.
func TestPIIRedactionEveryText(t *testing.T) {
	const email, card, ssn = "ana.lopez@example.com", "4111 1111 1111 1111", "123-45-6789"
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs = piiTextsScript, []string{piiTextsCatalog}
		o.VaultKey = []byte("0123456789abcdef0123456789abcdef")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	job, session := "texts-"+testserver.RandomID(), "texts-"+testserver.RandomID()
	body, err := json.Marshal(map[string]any{
		"job_id": job, "session_id": session, "prompt": "Update my details, please.",
		"parts": []map[string]string{{"type": "text", "text": fmt.Sprintf("Email %s, card %s, SSN %s.", email, card, ssn)}},
		"context": map[string]any{
			"user_role":      "support for " + email,
			"ui_page":        "/cards/4111111111111111",
			"metadata":       map[string]string{"ssn": ssn, "plan": "gold"},
			"workflow_state": map[string]any{"step": 2, "note": "called " + email},
		},
	})
	require.NoError(t, err)
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, string(body), &started)
	stream := started.GetStreamId()
	q := e.waitQuestion(stream, e.user)
	var ack pb.AnswerResponse
	e.ok("POST", "/v1/"+stream+"/questions/"+q.GetCallId(), e.user, fmt.Sprintf(`{"answer": "SSN %s, mail %s"}`, ssn, email), &ack)
	res, err := (&env{Server: e.Server, t: t}).result(stream)
	require.NoError(t, err)

	// A rejection's reason, which the model reads and the approvals table
	// keeps, in the same session.
	var refund pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"session_id": "`+session+`", "prompt": "Refund me"}`, &refund)
	pending := e.waitPending(refund.GetStreamId())
	var decided pb.ApproveResponse
	e.ok("POST", "/v1/"+refund.GetStreamId()+"/approvals/"+pending.GetCallId(), e.approver,
		`{"approval_id": "`+pending.GetApprovalId()+`", "approved": false, "reason": "write to `+email+` first"}`, &decided)
	refunded, err := (&env{Server: e.Server, t: t}).result(refund.GetStreamId())
	require.NoError(t, err)

	// A cancellation's reason, which the turn keeps and logs.
	var cancelled pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"prompt": "Update my details"}`, &cancelled)
	e.waitQuestion(cancelled.GetStreamId(), e.user)
	var cancelAck pb.CancelResponse
	e.ok("POST", "/v1/"+cancelled.GetStreamId()+"/cancel", e.user, `{"reason": "SSN `+ssn+` was wrong"}`, &cancelAck)
	_, _ = (&env{Server: e.Server, t: t}).result(cancelled.GetStreamId()) // once it has ended

	// A message to a conversation, its context as a turn's.
	conv := "texts-" + testserver.RandomID()
	var sent pb.SendMessageResponse
	e.ok("POST", "/v1/conversations/"+conv+"/messages", e.user,
		`{"prompt": "Hello", "context": {"user_role": "support for `+email+`", "metadata": {"ssn": "`+ssn+`"}}}`, &sent)
	_, err = (&env{Server: e.Server, t: t}).result(sent.GetStreamId())
	require.NoError(t, err)
	convTurn, err := e.Store().Turn(ctx, "demo", sent.GetJobId())
	require.NoError(t, err)
	require.Equal(t, "support for [EMAIL_1]", convTurn.Request.Context.UserRole)
	require.Equal(t, map[string]string{"ssn": "[SSN_1]"}, convTurn.Request.Context.Metadata)

	e.requireNoneOf(ctx, []string{email, card, "4111111111111111", ssn},
		stream, refund.GetStreamId(), cancelled.GetStreamId(), sent.GetStreamId(), sent.GetConversationId())
	require.Equal(t, "Noted: SSN [SSN_1], mail [EMAIL_1]", res.Output, "the answer is redacted with the turn's placeholders")
	require.Contains(t, refunded.Output, "write to [EMAIL_1] first", "and so is a rejection's reason")
	reqs := e.Model.Requests()
	prompt := reqs[0].Messages[len(reqs[0].Messages)-1]
	require.Len(t, prompt.Parts, 2)
	require.Equal(t, "Email [EMAIL_1], card [CARD_1], SSN [SSN_1].", prompt.Parts[1].Text, "the model read the text part redacted")
	turn, err := e.Store().Turn(ctx, "demo", job)
	require.NoError(t, err)
	c := turn.Request.Context
	require.Equal(t, "support for [EMAIL_1]", c.UserRole)
	require.Equal(t, "/cards/[CARD_2]", c.UIPage, "another value, another placeholder")
	require.Equal(t, map[string]string{"ssn": "[SSN_1]", "plan": "gold"}, c.Metadata)
	require.JSONEq(t, `{"step": 2, "note": "called [EMAIL_1]"}`, string(c.WorkflowState))
	hist := testserver.History(ctx, t, e.Client(), stream, "")
	var input agent.TurnRequest
	require.NoError(t, json.Unmarshal(hist[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &input))
	require.JSONEq(t, string(c.WorkflowState), string(input.Context.WorkflowState), "the workflow's input is the redacted request")
	c.WorkflowState, input.Context.WorkflowState = nil, nil
	require.Equal(t, c, input.Context, "the workflow's input is the redacted request")
	require.Equal(t, "Email [EMAIL_1], card [CARD_1], SSN [SSN_1].", input.Parts[0].Text)
}
