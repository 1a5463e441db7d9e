package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// FuzzMCPInput: any arguments of an MCP tools/call are a prompt that is
// not blank, or an error that says what is wrong; never a panic.
func FuzzMCPInput(f *testing.F) {
	for _, s := range []string{`{"prompt":"What is 2+2?"}`, `{"prompt":""}`, `{"prompt":3}`, `{"prompt":"a","x":1}`,
		`{}`, `[]`, `null`, ``, `{"prompt":"a"} {"prompt":"b"}`, `{"prompt":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeMCPInput(json.RawMessage(raw))
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, strings.TrimSpace(in.Prompt))
	})
}

// FuzzMCPTaskParams: any params of a Tasks method, and any requestState a
// client sends back, decode or fail with an error; never a panic, and a
// state that decodes names a turn.
func FuzzMCPTaskParams(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"turn/demo/j","inputResponses":{"approval-3":{"action":"accept","content":{"approved":true}}},` +
			`"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		`{"taskId":"turn/demo/j","inputResponses":{"question-4":{"action":"decline"}}}`,
		`{"taskId":7}`, `{"inputResponses":{"k":{"roots":[]}}}`, `{"inputResponses":{"k":{}}}`, `{"_meta":{"io.modelcontextprotocol/clientCapabilities":3}}`,
		`{"stream_id":"turn/demo/j","asked":["approval-3"]}`, `{"stream_id":""}`, `null`, ``, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p mcpTaskParams
		if json.Unmarshal(raw, &p) == nil {
			_, _ = declaresTasks(p.Meta), declaresElicitation(p.Meta)
		}
		if st, err := parseMCPCallState(string(raw)); err == nil {
			require.NotEmpty(t, st.StreamID)
		} else {
			require.NotEmpty(t, err.Error())
		}
	})
}

// FuzzMCPTask: any event log folds into a task whose state is one of the
// extension's, with what that status carries: input requests when input
// is required, a result once completed; and into a call's progress
// notifications; never a panic.
func FuzzMCPTask(f *testing.F) {
	for _, s := range []string{
		`[{"event_index":1,"kind":"status","status":"RUNNING"},{"event_index":2,"kind":"approval_required","tool":{"call_id":"c","name":"calc","approval_id":"a"}},` +
			`{"event_index":3,"kind":"status","status":"WAITING_APPROVAL"}]`,
		`[{"event_index":1,"kind":"question","tool":{"call_id":"q"},"question":{"text":"Which?","choices":["a"],"role":"user"}}]`,
		`[{"event_index":1,"kind":"token","text":"4"},{"event_index":2,"kind":"status","status":"COMPLETED"}]`,
		`[{"event_index":1,"kind":"status","status":"CANCELED","error":{"message":"stop"}}]`,
		`[{"event_index":1,"kind":"approval_decided"},{"event_index":2,"kind":"question_answered","tool":{"call_id":"q"}}]`,
		`[{"event_index":9,"kind":"status","status":"FAILED"},{"event_index":10,"kind":"token","text":"late"}]`,
		`[{"event_index":1,"kind":"token","text":"no"},{"event_index":2,"kind":"status","status":"RETRYING","void_from":1},` +
			`{"event_index":3,"kind":"tool_progress","tool":{"call_id":"g","name":"gh","message":"page 2"}},{"event_index":4,"kind":"token","text":"4"}]`,
	} {
		f.Add([]byte(s))
	}
	caller := gateway.Token{Tenant: "demo", Name: "ana", Roles: []gateway.Role{gateway.RoleUser, gateway.RoleApprover}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var events []agent.Event
		if json.Unmarshal(raw, &events) != nil {
			return
		}
		s := newMCPTask("turn/demo/j", events).state(caller, mcpTaskTimes{}, "complete", true)
		require.Contains(t, []string{mcpTaskWorking, mcpTaskInputRequired, mcpTaskCompleted, mcpTaskCancelled}, s.Status)
		require.Equal(t, s.Status == mcpTaskInputRequired, len(s.InputRequests) > 0)
		require.Equal(t, s.Status == mcpTaskCompleted, s.Result != nil)
		_, err := json.Marshal(s)
		require.NoError(t, err)
		p := newMCPProgress(nil, nil, mcpWording{elicits: true, caller: caller})
		for _, e := range events {
			for _, msg := range p.messages(e) {
				require.NotEmpty(t, msg)
			}
		}
	})
}
