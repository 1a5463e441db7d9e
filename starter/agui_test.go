package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
)

const aguiScript = `
pacing: {chunk_words: 1, delay_ms: 20}
rules:
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {reasoning: 'A product: the calculator knows.', tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - when: {}
    reply: {text: 'Hello there.'}
`

const aguiCatalog = `
tenant: demo
tools:
  - name: calculator
    kind: calculator
agents:
  - id: calc
    description: Does arithmetic with a calculator.
    model: openai:gpt-4o-mini
    tools: [calculator]
    expose: [ag_ui]
  - id: hidden
    model: openai:gpt-4o-mini
    expose: [mcp]
`

const aguiOtherCatalog = `
tenant: other
agents:
  - id: theirs
    model: openai:gpt-4o-mini
    expose: [ag_ui]
`

// aguiPost posts body to an agent's AG-UI route with token ("" for none).
func aguiPost(ctx context.Context, t *testing.T, srv *testserver.Server, agentID, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.HTTPAPIAddr()+"/ag-ui/"+agentID, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// aguiEvents reads an AG-UI event stream to its end: the JSON of each
// data line.
func aguiEvents(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			require.True(t, line == "" || strings.HasPrefix(line, ":"), "an SSE line AG-UI does not send: %q", line)
			continue
		}
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e), line)
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

// aguiTypes is the events' types, each run of one type as one.
func aguiTypes(events []map[string]any) []string {
	var out []string
	for _, e := range events {
		typ, _ := e["type"].(string)
		if len(out) == 0 || out[len(out)-1] != typ {
			out = append(out, typ)
		}
	}
	return out
}

// aguiJoin joins the deltas of the events of type typ.
func aguiJoin(events []map[string]any, typ string) string {
	var b strings.Builder
	for _, e := range events {
		if e["type"] == typ {
			b.WriteString(e["delta"].(string))
		}
	}
	return b.String()
}

// TestAGUIRun: an AG-UI client's run of an exposed agent is a durable
// turn, answered with the AG-UI events docs/events.md maps its log to:
// a streamed one-tool turn's events in order, with consistent ids, its
// reasoning, its tool call and result, and its answer. A run posted again
// with the same runId reads the same turn; a run with a threadId is a
// message of that session. Agents not exposed, other tenants' agents, no
// token and bad inputs are refused with a problem that says why.
func TestAGUIRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: aguiScript, Catalogs: []string{aguiCatalog, aguiOtherCatalog},
		Tokens:  map[string]string{"tok": "demo", "tok2": "other"},
		HTTPAPI: true,
		Logger:  zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})

	input := `{"threadId":"","runId":"agui-run-1","state":{},"messages":[{"id":"m1","role":"user","content":"What is 12.5 * 4?"}],"tools":[],"context":[],"forwardedProps":{}}`
	resp := aguiPost(ctx, t, srv, "calc", "tok", input)
	require.Equal(t, "turn/demo/agui-run-1", resp.Header.Get("X-Agentflow-Stream-Id"))
	events := aguiEvents(t, resp)
	require.Equal(t, []string{
		"RUN_STARTED", "STEP_STARTED",
		"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_FINISHED",
		"STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED",
		"RUN_FINISHED",
	}, aguiTypes(events))

	first, last := events[0], events[len(events)-1]
	require.Equal(t, "agui-run-1", first["runId"])
	require.Equal(t, "agui-run-1", first["threadId"], "a run without a thread is a thread of its own")
	require.Equal(t, first["runId"], last["runId"])
	require.Equal(t, first["threadId"], last["threadId"])
	require.Equal(t, "The result is 50.", last["result"])
	require.Equal(t, "A product: the calculator knows.", aguiJoin(events, "REASONING_MESSAGE_CONTENT"))
	require.Equal(t, "The result is 50.", aguiJoin(events, "TEXT_MESSAGE_CONTENT"))
	args := aguiJoin(events, "TOOL_CALL_ARGS")
	require.JSONEq(t, `{"expression": "12.5 * 4"}`, args)

	// The ids: each message's events name it; the call's name it.
	var callID, textID, reasoningID string
	steps := map[string]int{}
	for _, e := range events {
		switch e["type"] {
		case "TOOL_CALL_START":
			callID = e["toolCallId"].(string)
			require.Equal(t, "calculator", e["toolCallName"])
		case "TOOL_CALL_ARGS", "TOOL_CALL_END":
			require.Equal(t, callID, e["toolCallId"])
		case "TOOL_CALL_RESULT":
			require.Equal(t, callID, e["toolCallId"])
			require.Equal(t, "50", e["content"])
			require.Equal(t, "tool", e["role"])
			require.NotEmpty(t, e["messageId"])
		case "TEXT_MESSAGE_START":
			textID = e["messageId"].(string)
			require.Equal(t, "assistant", e["role"])
		case "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END":
			require.Equal(t, textID, e["messageId"])
		case "REASONING_START":
			reasoningID = e["messageId"].(string)
		case "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END":
			require.Equal(t, reasoningID, e["messageId"])
		case "STEP_STARTED":
			steps[e["stepName"].(string)]++
		case "STEP_FINISHED":
			steps[e["stepName"].(string)]--
		}
	}
	require.NotEmpty(t, callID)
	require.NotEqual(t, textID, reasoningID)
	require.Len(t, steps, 2)
	for name, open := range steps {
		require.Zero(t, open, "step %q started and finished once", name)
	}

	// The same runId again: the same turn, read again from its start.
	again := aguiEvents(t, aguiPost(ctx, t, srv, "calc", "tok", input))
	require.Equal(t, events, again)

	// A thread: a message of the session's Conversation.
	message := `{"threadId":"agui-thread-1","runId":"agui-msg-1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[]}`
	threaded := aguiEvents(t, aguiPost(ctx, t, srv, "calc", "tok", message))
	require.Equal(t, []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"},
		aguiTypes(threaded))
	require.Equal(t, "agui-thread-1", threaded[0]["threadId"])
	require.Equal(t, "agui-msg-1", threaded[0]["runId"])
	require.Equal(t, "Hello there.", threaded[len(threaded)-1]["result"])
	require.Equal(t, threaded, aguiEvents(t, aguiPost(ctx, t, srv, "calc", "tok", message)), "the same message again: the same turn")
	next := aguiEvents(t, aguiPost(ctx, t, srv, "calc", "tok", `{"threadId":"agui-thread-1","messages":[{"id":"m2","role":"user","content":"What is 2 + 2?"}]}`))
	require.Equal(t, "agui-thread-1", next[0]["threadId"])
	require.NotEqual(t, "agui-msg-1", next[0]["runId"])
	require.Equal(t, "The result is 4.", next[len(next)-1]["result"])

	// The other tenant runs its own agent, not demo's.
	theirs := aguiEvents(t, aguiPost(ctx, t, srv, "theirs", "tok2", `{"messages":[{"id":"m1","role":"user","content":"hi"}]}`))
	require.Equal(t, "RUN_FINISHED", theirs[len(theirs)-1]["type"])

	user := `[{"id":"m1","role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, agent, token, body string
		status                   int
		detail                   string
	}{
		{"an agent not exposed through AG-UI", "hidden", "tok", `{"messages":` + user + `}`, http.StatusNotFound, `agent "hidden" is not served over AG-UI`},
		{"another tenant's agent", "theirs", "tok", `{"messages":` + user + `}`, http.StatusNotFound, `agent "theirs" is not served over AG-UI`},
		{"another tenant's token", "calc", "tok2", `{"messages":` + user + `}`, http.StatusNotFound, `agent "calc" is not served over AG-UI`},
		{"an unknown agent", "nobody", "tok", `{"messages":` + user + `}`, http.StatusNotFound, `agent "nobody" is not served over AG-UI`},
		{"no token", "calc", "", `{"messages":` + user + `}`, http.StatusUnauthorized, "token"},
		{"malformed JSON", "calc", "tok", `{"messages":`, http.StatusBadRequest, "not JSON"},
		{"no user message", "calc", "tok", `{"messages":[{"id":"a","role":"assistant","content":"x"}]}`, http.StatusBadRequest, "has no user message"},
		{"messages not a list", "calc", "tok", `{"messages":"hi"}`, http.StatusBadRequest, "messages: want a list of messages"},
		{"client-side tools", "calc", "tok", `{"messages":` + user + `,"tools":[{"name":"ask","description":"d","parameters":{}}]}`, http.StatusBadRequest, "client-side tools"},
		{"a runId that is no job id", "calc", "tok", `{"runId":"a/b","messages":` + user + `}`, http.StatusBadRequest, "runId \"a/b\" may not contain '/'"},
		{"an oversized body", "calc", "tok", `{"messages":[{"id":"m1","role":"user","content":"` + strings.Repeat("x", gateway.MaxBodyBytes) + `"}]}`,
			http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := aguiPost(ctx, t, srv, tc.agent, tc.token, tc.body)
			require.Equal(t, tc.status, resp.StatusCode)
			require.Equal(t, gateway.ProblemContentType, resp.Header.Get("Content-Type"))
			var p gateway.Problem
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
			require.Contains(t, p.Detail, tc.detail)
		})
	}
}
