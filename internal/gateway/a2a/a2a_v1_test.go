package a2a

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestA2AV1Decode: 1.0 requests and their params decode to the 0.3
// door's inputs, or to 1.0's error for what is wrong.
func TestA2AV1Decode(t *testing.T) {
	msg := func(m string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":` + m + `}}`
	}
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
		prompt     string
	}{
		{"text", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}`), 0, "", "hi"},
		{"text and data", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"sum"},{"data":{"a":1}},{"data":[1,2]}]}`), 0, "", "sum\n\n{\"a\":1}\n\n[1,2]"},
		{"the role's number", msg(`{"messageId":"m","role":1,"parts":[{"text":"hi"}]}`), 0, "", "hi"},
		{"not JSON", `{"jsonrpc":`, -32700, "not JSON", ""},
		{"not an object", `[1]`, -32600, "not a JSON-RPC request object", ""},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"SendMessage"}`, -32600, `jsonrpc must be "2.0"`, ""},
		{"an id of the wrong type", `{"jsonrpc":"2.0","id":{},"method":"SendMessage"}`, -32600, "id must be", ""},
		{"no method", `{"jsonrpc":"2.0","id":1}`, -32600, "method must be", ""},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`, -32602, "params must be an object", ""},
		{"params of the wrong shape", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":3}}`, -32602, "params.message", ""},
		{"no message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, -32602, "params.message is required", ""},
		{"no message id", msg(`{"role":"ROLE_USER","parts":[{"text":"hi"}]}`), -32602, "messageId is required", ""},
		{"0.3's role", msg(`{"messageId":"m","role":"user","parts":[{"text":"hi"}]}`), -32602, `want "ROLE_USER"`, ""},
		{"an agent's message", msg(`{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"hi"}]}`), -32602, `want "ROLE_USER"`, ""},
		{"0.3's part", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text"}]}`), -32602, "has 0 of text, raw, url and data", ""},
		{"two members", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","url":"https://x"}]}`), -32602, "has 2 of", ""},
		{"a file", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://x/a.txt"}]}`), -32005, "send text or data parts", ""},
		{"no text", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":" "}]}`), -32602, "no text", ""},
		{"a context with a slash", msg(`{"messageId":"m","role":"ROLE_USER","contextId":"a/b","parts":[{"text":"hi"}]}`), -32602, "may not contain", ""},
		{"too much text", msg(`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("a", agent.MaxPromptBytes+1) + `"}]}`), -32602, "the limit is", ""},
		{"a task without an id", `{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{}}`, -32602, "params.id is required", ""},
		{"a task id of the wrong type", `{"jsonrpc":"2.0","id":"x","method":"CancelTask","params":{"id":5}}`, -32602, "params.id", ""},
		{"a negative history", `{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"t","historyLength":-1}}`, -32602, "historyLength", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeA2AV1Body([]byte(tc.body))
			if tc.code == 0 {
				require.NoError(t, err)
				var p struct {
					Params json.RawMessage `json:"params"`
				}
				require.NoError(t, json.Unmarshal([]byte(tc.body), &p))
				params, err := decodeA2AV1Send(p.Params)
				require.NoError(t, err)
				in, err := decodeA2AMessage(params)
				require.NoError(t, err)
				require.Equal(t, tc.prompt, in.prompt)
				return
			}
			require.Error(t, err)
			e := a2aV1ErrorOf(err)
			require.Equal(t, tc.code, e["code"], "%v", err)
			require.Contains(t, e["message"], tc.want)
		})
	}
}

// decodeA2AV1Body decodes a request and its params as the door does,
// up to the turn: the first error.
func decodeA2AV1Body(body []byte) error {
	call, err := parseA2AV1Call(body)
	if err != nil {
		return err
	}
	switch call.Method {
	case "SendMessage", "SendStreamingMessage":
		p, err := decodeA2AV1Send(call.Params)
		if err != nil {
			return err
		}
		_, err = decodeA2AMessage(p)
		return err
	default:
		_, err := decodeA2AV1TaskID(call.Params)
		return err
	}
}

// TestA2AV1Version: the A2A-Version a request names.
func TestA2AV1Version(t *testing.T) {
	for _, tc := range []struct{ header, query, want, err string }{
		{"", "", "", ""},
		{"1.0", "", "1.0", ""},
		{" 1.0.1 ", "", "1.0", ""},
		{"0.3", "", "0.3", ""},
		{"0.3.0", "", "0.3", ""},
		{"", "1.0", "1.0", ""},
		{"0.5", "", "", `A2A-Version "0.5" is not served`},
		{"2", "", "", "is not served"},
		{"1.0.0.0", "", "", "is not served"},
	} {
		r := httptest.NewRequest("POST", "/a2a/x?A2A-Version="+tc.query, nil)
		r.Header.Set("A2A-Version", tc.header)
		v, err := a2aRequestVersion(r)
		if tc.err != "" {
			require.ErrorIs(t, err, errA2AVersionNotSupported)
			require.ErrorContains(t, err, tc.err)
			require.Equal(t, -32009, a2aV1ErrorOf(err)["code"])
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, v, "header %q query %q", tc.header, tc.query)
	}
}

// TestA2AV1Render: the 0.3 door's task and updates, in 1.0's JSON.
func TestA2AV1Render(t *testing.T) {
	block := func(b agent.Block) json.RawMessage { j, _ := json.Marshal(b); return j }
	id := "turn/demo/c1~j1"
	tk := newA2ATask(id, a2aContextOf(id))
	var updates []string
	for i, e := range []agent.Event{
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{CallID: "c", Name: "calc", ApprovalID: "apr_1"}},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockText, Text: "The result is 5."})},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockJSON, JSON: json.RawMessage(`{"a":1}`)})},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockImage, Ref: "cas://sha256/ab", MIMEType: "image/png"})},
		{Kind: agent.EventStatus, Status: agent.StreamCompleted},
	} {
		e.Index = int64(i + 1)
		for _, ev := range tk.apply(e) {
			b, err := json.Marshal(v1EventOf(ev))
			require.NoError(t, err)
			updates = append(updates, string(b))
		}
	}
	require.JSONEq(t, `{"statusUpdate":{"taskId":"turn/demo/c1~j1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`, updates[0])
	require.Contains(t, updates[1], `"state":"TASK_STATE_INPUT_REQUIRED"`)
	require.Contains(t, updates[1], `"role":"ROLE_AGENT"`)
	require.JSONEq(t, `{"artifactUpdate":{"taskId":"turn/demo/c1~j1","contextId":"c1","artifact":{"artifactId":"answer","name":"answer","parts":[{"text":"The result is 5."}]}}}`, updates[2])
	require.JSONEq(t, `{"artifactUpdate":{"taskId":"turn/demo/c1~j1","contextId":"c1","append":true,"artifact":{"artifactId":"answer","name":"answer","parts":[{"data":{"a":1},"mediaType":"application/json"}]}}}`, updates[3])
	require.Contains(t, updates[4], `{"url":"cas://sha256/ab","mediaType":"image/png"}`)
	require.JSONEq(t, `{"statusUpdate":{"taskId":"turn/demo/c1~j1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`, updates[5])
	task, err := json.Marshal(v1EventOf(tk.task()))
	require.NoError(t, err)
	require.JSONEq(t, `{"task":{"id":"turn/demo/c1~j1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},
		"metadata":{"agentflow/stream_id":"turn/demo/c1~j1"},
		"artifacts":[{"artifactId":"answer","name":"answer","parts":[{"text":"The result is 5."},{"data":{"a":1},"mediaType":"application/json"},
		{"url":"cas://sha256/ab","mediaType":"image/png"}]}]}}`, string(task))
	for s, name := range v1States {
		require.Equal(t, name, v1State(s))
	}
	require.Equal(t, "TASK_STATE_UNSPECIFIED", v1State(a2a.TaskStateUnknown))
}

// TestA2ACardBothVersions: the one card a 0.3 client (a2a-go v0.3's
// types) and a 1.0 client (supportedInterfaces, securityRequirements,
// httpAuthSecurityScheme) both read.
func TestA2ACardBothVersions(t *testing.T) {
	card := a2aCard(agent.Agent{ID: "calc", Version: 3}, "https://h/a2a/calc")
	raw, err := a2aCardJSON(card)
	require.NoError(t, err)
	var legacy a2a.AgentCard
	require.NoError(t, json.Unmarshal(raw, &legacy))
	require.Equal(t, *card, legacy)
	var v1 struct {
		SupportedInterfaces  []struct{ URL, ProtocolBinding, ProtocolVersion string } `json:"supportedInterfaces"`
		SecurityRequirements []struct {
			Schemes map[string]struct {
				List []string `json:"list"`
			} `json:"schemes"`
		} `json:"securityRequirements"`
		SecuritySchemes map[string]struct {
			HTTP *struct{ Scheme string } `json:"httpAuthSecurityScheme"`
		} `json:"securitySchemes"`
	}
	require.NoError(t, json.Unmarshal(raw, &v1))
	require.Len(t, v1.SupportedInterfaces, 2)
	require.Equal(t, "1.0", v1.SupportedInterfaces[0].ProtocolVersion, "1.0 first")
	require.Equal(t, "0.3", v1.SupportedInterfaces[1].ProtocolVersion)
	for _, i := range v1.SupportedInterfaces {
		require.Equal(t, "JSONRPC", i.ProtocolBinding)
		require.Equal(t, "https://h/a2a/calc", i.URL)
	}
	require.Len(t, v1.SecurityRequirements, 1)
	require.Contains(t, v1.SecurityRequirements[0].Schemes, "bearer")
	require.Equal(t, "bearer", v1.SecuritySchemes["bearer"].HTTP.Scheme)
}

// TestA2ADecisionOf: what a message for a task decides.
func TestA2ADecisionOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parts    a2a.ContentParts
		decides  bool
		approved bool
		reason   string
	}{
		{"approved, with a reason", a2a.ContentParts{a2a.DataPart{Data: map[string]any{"approved": true, "reason": "fine"}}}, true, true, "fine"},
		{"rejected", a2a.ContentParts{a2a.TextPart{Text: "no"}, a2a.DataPart{Data: map[string]any{"approved": false}}}, true, false, ""},
		{"not a boolean", a2a.ContentParts{a2a.DataPart{Data: map[string]any{"approved": "yes"}}}, false, false, ""},
		{"text", a2a.ContentParts{a2a.TextPart{Text: "approve"}}, false, false, ""},
	} {
		d, ok := a2aDecisionOf(&a2a.Message{Parts: tc.parts})
		require.Equal(t, tc.decides, ok, tc.name)
		require.Equal(t, tc.approved, d.approved, tc.name)
		require.Equal(t, tc.reason, d.reason, tc.name)
	}
}

// FuzzA2AV1Request: any body sent to the 1.0 door decodes to the door's
// input or to one of 1.0's errors, never a panic; what decodes keeps the
// door's bounds.
func FuzzA2AV1Request(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	f.Add(`{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":1,"contextId":"c","parts":[{"data":{"approved":true}}]},"configuration":{"returnImmediately":true}}}`)
	f.Add(`{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"turn/demo/j","historyLength":2}}`)
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":""}}`)
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"eA==","filename":"a"}]}}}`)
	f.Add(`{"jsonrpc":"2.0","method":"CancelTask","params":[]}`)
	f.Fuzz(func(t *testing.T, body string) {
		err := decodeA2AV1Body([]byte(body))
		if err != nil {
			known := false
			for _, c := range a2aV1Codes {
				known = known || errors.Is(err, c.kind)
			}
			require.True(t, known, "one of 1.0's errors: %v", err)
			e := a2aV1ErrorOf(err)
			_, merr := json.Marshal(e)
			require.NoError(t, merr)
			return
		}
		call, err := parseA2AV1Call([]byte(body))
		require.NoError(t, err)
		if call.Method != "SendMessage" && call.Method != "SendStreamingMessage" {
			return
		}
		p, err := decodeA2AV1Send(call.Params)
		require.NoError(t, err)
		in, err := decodeA2AMessage(p)
		require.NoError(t, err)
		require.NotEmpty(t, strings.TrimSpace(in.prompt))
		require.LessOrEqual(t, len(in.prompt), agent.MaxPromptBytes)
		require.NoError(t, checkContextID(in.contextID))
	})
}
