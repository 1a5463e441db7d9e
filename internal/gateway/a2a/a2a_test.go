package a2a

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestA2ADecodeMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params string
		prompt string
		ctxID  string
		kind   error
		want   string
	}{
		{"text", `{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}`, "hi", "", nil, ""},
		{"text and data", `{"message":{"role":"user","messageId":"m","contextId":"c1","parts":[{"kind":"text","text":"sum"},{"kind":"data","data":{"a":1}}]}}`,
			"sum\n\n{\"a\":1}", "c1", nil, ""},
		{"no message", `{}`, "", "", a2a.ErrInvalidParams, "params.message is required"},
		{"an agent's message", `{"message":{"role":"agent","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}`, "", "", a2a.ErrInvalidParams, `want "user"`},
		{"no text", `{"message":{"role":"user","messageId":"m","parts":[]}}`, "", "", a2a.ErrInvalidParams, "no text"},
		{"a file", `{"message":{"role":"user","messageId":"m","parts":[{"kind":"file","file":{"uri":"https://x"}}]}}`, "", "", a2a.ErrUnsupportedContentType, "send text or data parts"},
		{"a task's (an answer to its question)", `{"message":{"role":"user","messageId":"m","taskId":"t","parts":[{"kind":"text","text":"hi"}]}}`, "hi", "", nil, ""},
		{"a context with a slash", `{"message":{"role":"user","messageId":"m","contextId":"a/b","parts":[{"kind":"text","text":"hi"}]}}`, "", "", a2a.ErrInvalidParams, "may not contain"},
		{"a long context", `{"message":{"role":"user","messageId":"m","contextId":"` + strings.Repeat("c", 129) + `","parts":[{"kind":"text","text":"hi"}]}}`,
			"", "", a2a.ErrInvalidParams, "the limit is 128"},
		{"too much text", `{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"` + strings.Repeat("a", agent.MaxPromptBytes+1) + `"}]}}`,
			"", "", a2a.ErrInvalidParams, "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p a2a.MessageSendParams
			require.NoError(t, json.Unmarshal([]byte(tc.params), &p))
			in, err := decodeA2AMessage(&p)
			if tc.kind != nil {
				require.ErrorIs(t, err, tc.kind)
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.prompt, in.prompt)
			require.Equal(t, tc.ctxID, in.contextID)
		})
	}
}

func TestA2ATaskMapping(t *testing.T) {
	block := func(b agent.Block) json.RawMessage { j, _ := json.Marshal(b); return j }
	id := "turn/demo/c1~j1"
	tk := newA2ATask(id, a2aContextOf(id))
	require.Equal(t, "c1", tk.contextID)
	var states []a2a.TaskState
	var finals []bool
	var asked string
	for i, e := range []agent.Event{
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "c", Name: "calc"}},
		{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{CallID: "c", Name: "calc", ApprovalID: "apr_0123"}},
		{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval},
		{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "c", Name: "calc"}, Approval: &agent.ApprovalEvent{Outcome: "approved"}},
		{Kind: agent.EventToken, Text: "ignored", Child: &agent.ChildEvent{}},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockText, Text: "The result is 5."})},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockJSON, JSON: json.RawMessage(`[1,2]`)})},
		{Kind: agent.EventContent, Content: block(agent.Block{Type: agent.BlockImage, Ref: "cas://sha256/ab", MIMEType: "image/png"})},
		{Kind: agent.EventContent, Content: block(agent.CitationBlocks([]agent.Citation{{ChunkID: "doc_ab#2", DocumentID: "doc_ab", DocumentTitle: "Refund policy", Position: 2}})[0])},
		{Kind: agent.EventStatus, Status: agent.StreamCompleted},
	} {
		e.Index = int64(i + 1)
		for _, ev := range tk.apply(e) {
			if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
				states = append(states, u.Status.State)
				finals = append(finals, u.Final)
				if u.Status.State == a2a.TaskStateInputRequired {
					asked = u.Status.Message.Parts[0].(a2a.TextPart).Text
				}
			}
		}
	}
	require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
	require.Equal(t, []bool{false, false, false, false, true}, finals)
	require.Equal(t, `the call c of the tool calc waits for a person's approval (approver role): answer with a message for this task, {"approved": true|false} as data or the text approve or reject, or POST /v1/turn/demo/c1~j1/approvals/c {"approval_id": "apr_0123", "approved"}`,
		asked, "what an approver sends, with the approval id that binds it to the call")
	task := tk.task()
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Equal(t, a2a.ContentParts{a2a.TextPart{Text: "The result is 5."}, a2a.DataPart{Data: map[string]any{"value": []any{1.0, 2.0}}},
		a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{MimeType: "image/png"}, URI: "cas://sha256/ab"}},
		a2a.DataPart{Data: map[string]any{"chunk_id": "doc_ab#2", "document_id": "doc_ab", "document_title": "Refund policy", "position": 2.0},
			Metadata: map[string]any{"kind": "citation"}}}, task.Artifacts[0].Parts, "a cited chunk is a data part of the answer")

	for _, tc := range []struct {
		err   *agent.TurnError
		state a2a.TaskState
	}{
		{&agent.TurnError{Type: agent.CodeInvalid.Class().Type, Message: "bad"}, a2a.TaskStateRejected},
		{&agent.TurnError{Type: agent.CodeModelFailed.Class().Type, Message: "down"}, a2a.TaskStateFailed},
	} {
		tk := newA2ATask(id, "c1")
		tk.apply(agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: tc.err})
		require.Equal(t, tc.state, tk.state)
		require.Contains(t, tk.task().Status.Message.Parts[0].(a2a.TextPart).Text, tc.err.Message)
	}
	require.Equal(t, "j1", a2aContextOf("turn/demo/j1"))
}

// FuzzA2AMessage: any params of message/send decode to a prompt or a
// protocol error, never a panic.
func FuzzA2AMessage(f *testing.F) {
	f.Add(`{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}`)
	f.Add(`{"message":{"role":"user","messageId":"m","contextId":"c~1","parts":[{"kind":"data","data":{"a":[1]}}]}}`)
	f.Add(`{"message":{"role":"user","parts":[{"kind":"file","file":{"bytes":"eA=="}}]}}`)
	f.Add(`{"message":null}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var p a2a.MessageSendParams
		if json.Unmarshal([]byte(raw), &p) != nil {
			return
		}
		in, err := decodeA2AMessage(&p)
		if err != nil {
			known := false
			for _, kind := range []error{a2a.ErrInvalidParams, a2a.ErrUnsupportedContentType, a2a.ErrUnsupportedOperation} {
				known = known || errors.Is(err, kind)
			}
			require.True(t, known, "a protocol error: %v", err)
			return
		}
		require.NotEmpty(t, strings.TrimSpace(in.prompt))
		require.LessOrEqual(t, len(in.prompt), agent.MaxPromptBytes)
		require.NoError(t, checkContextID(in.contextID))
	})
}

// FuzzA2ATaskEvents: any event, folded into a task, makes a task the SDK
// encodes, never a panic.
func FuzzA2ATaskEvents(f *testing.F) {
	f.Add(`{"kind":"status","status":"COMPLETED"}`, "turn/demo/c~j")
	f.Add(`{"kind":"content","content":{"type":"json","json":3}}`, "turn/demo/j")
	f.Add(`{"kind":"approval_required"}`, "x")
	f.Fuzz(func(t *testing.T, raw, id string) {
		var e agent.Event
		if json.Unmarshal([]byte(raw), &e) != nil {
			return
		}
		tk := newA2ATask(id, a2aContextOf(id))
		for _, ev := range tk.apply(e) {
			_, err := json.Marshal(ev)
			require.NoError(t, err)
		}
		_, err := json.Marshal(tk.task())
		require.NoError(t, err)
	})
}
