package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// uiChunk is a chunk of the AI SDK's UI message stream, as a client
// reads it.
type uiChunk struct {
	Type            string          `json:"type"`
	ID              string          `json:"id"`
	Delta           string          `json:"delta"`
	MessageID       string          `json:"messageId"`
	ToolCallID      string          `json:"toolCallId"`
	ToolName        string          `json:"toolName"`
	InputTextDelta  string          `json:"inputTextDelta"`
	Input           json.RawMessage `json:"input"`
	Output          json.RawMessage `json:"output"`
	ErrorText       string          `json:"errorText"`
	ApprovalID      string          `json:"approvalId"`
	FinishReason    string          `json:"finishReason"`
	MessageMetadata struct {
		Usage agent.Usage `json:"usage"`
	} `json:"messageMetadata"`
}

// uiMessage is a UIMessage as the test sends it.
type uiMessage struct {
	ID    string           `json:"id"`
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
}

func userMessage(text string) uiMessage {
	return uiMessage{ID: "u-" + testserver.RandomID(), Role: "user", Parts: []map[string]any{{"type": "text", "text": text}}}
}

// uiBody is a chat request's body, as the SDK's transport sends it.
func uiBody(t *testing.T, chat, agentID string, msgs ...uiMessage) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": chat, "agent": agentID, "trigger": "submit-message", "messages": msgs})
	require.NoError(t, err)
	return string(b)
}

// uiStream sends a chat request (or, with no body, resumes) that must
// answer 200 with a UI message stream, and reads it to its [DONE].
func (e *httpEnv) uiStream(method, path, token, body string) (chunks []uiChunk, header http.Header) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp := e.sseCall(ctx, method, path, token, body, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	require.Equal(e.t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(e.t, "v1", resp.Header.Get("x-vercel-ai-ui-message-stream"))
	rd := sse.NewReader(resp.Body)
	done := false
	for {
		m, err := rd.Next()
		if errors.Is(err, io.EOF) {
			require.True(e.t, done, "the stream ends with [DONE]")
			return chunks, resp.Header
		}
		require.NoError(e.t, err)
		require.False(e.t, done, "nothing after [DONE]")
		require.Equal(e.t, "message", m.Type, "data events only")
		if m.Data == "[DONE]" {
			done = true
			continue
		}
		var c uiChunk
		require.NoError(e.t, json.Unmarshal([]byte(m.Data), &c), "%s", m.Data)
		require.NotEqual(e.t, "error", c.Type, "%s", m.Data)
		chunks = append(chunks, c)
	}
}

// folded is chunks' types, a run of deltas of one part as one.
func foldedTypes(chunks []uiChunk) []string {
	var out []string
	for i, c := range chunks {
		if i > 0 && strings.HasSuffix(c.Type, "-delta") && chunks[i-1].Type == c.Type {
			continue
		}
		out = append(out, c.Type)
	}
	return out
}

// grpcTurn is the whole log of a turn as gRPC Resume gives it.
func (e *httpEnv) grpcTurn(streamID string) []agent.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.user), 2*time.Minute)
	defer cancel()
	stream, err := pb.NewAgentServiceClient(e.Conn).Resume(ctx, &pb.ResumeRequest{StreamId: streamID})
	require.NoError(e.t, err)
	return fromPB(readAll(e.t, stream))
}

// requireMapped: the chunks are the UI message stream of the events, by
// the table of docs/events.md: each step's start and finish, the text,
// each call's streamed input, its input and its output, the usage.
func requireMapped(t *testing.T, events []agent.Event, chunks []uiChunk) {
	t.Helper()
	count := func(kind agent.EventKind) int {
		n := 0
		for _, ev := range events {
			if ev.Kind == kind && ev.Child == nil {
				n++
			}
		}
		return n
	}
	types := map[string]int{}
	var text strings.Builder
	inputs := map[string]string{}
	for _, c := range chunks {
		types[c.Type]++
		switch c.Type {
		case "text-delta":
			text.WriteString(c.Delta)
		case "tool-input-delta":
			inputs[c.ToolCallID] += c.InputTextDelta
		}
	}
	require.Equal(t, count(agent.EventStepStart), types["start-step"])
	require.Equal(t, count(agent.EventStepFinish), types["finish-step"])
	require.Equal(t, agent.ReplayText(events), text.String())
	require.Equal(t, count(agent.EventToolStart), types["tool-input-available"])
	require.Equal(t, count(agent.EventToolEnd), types["tool-output-available"])
	args := map[string]string{}
	for _, ev := range agent.Unvoided(events) {
		switch ev.Kind {
		case agent.EventToolArgsDelta:
			args[ev.Tool.CallID] += ev.Tool.ArgsDelta
		case agent.EventToolStart:
			require.True(t, hasChunk(chunks, func(c uiChunk) bool {
				return c.Type == "tool-input-available" && c.ToolCallID == ev.Tool.CallID && c.ToolName == ev.Tool.Name && string(c.Input) == string(ev.Tool.Args)
			}), "the input of %s", ev.Tool.CallID)
		case agent.EventToolEnd:
			out, _ := json.Marshal(ev.Tool.Output)
			require.True(t, hasChunk(chunks, func(c uiChunk) bool {
				return c.Type == "tool-output-available" && c.ToolCallID == ev.Tool.CallID && string(c.Output) == string(out)
			}), "the output of %s", ev.Tool.CallID)
		}
	}
	require.Equal(t, args, inputs, "each call's streamed input")
	last := chunks[len(chunks)-1]
	require.Equal(t, "finish", last.Type)
	// gRPC's usage event has the three counts (step_finish has them all).
	want, got := logUsage(events), last.MessageMetadata.Usage
	require.Equal(t, [3]int{want.PromptTokens, want.CompletionTokens, want.TotalTokens}, [3]int{got.PromptTokens, got.CompletionTokens, got.TotalTokens},
		"the turn's usage, summed")
}

func hasChunk(chunks []uiChunk, f func(uiChunk) bool) bool {
	for _, c := range chunks {
		if f(c) {
			return true
		}
	}
	return false
}

// TestAISDKChat: a useChat request streams a one-tool turn as the UI
// message stream, chunk for event as gRPC Resume gives the same turn; the
// chat's second message continues its conversation.
func TestAISDKChat(t *testing.T) {
	e := newHTTPEnv(t)
	chat := "chat-" + testserver.RandomID()
	first := userMessage("What is 12.5 * 4?")
	chunks, header := e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", first))
	streamID := contract.TurnWorkflowID("demo", chat+"-1")
	require.Equal(t, streamID, header.Get("X-Agentflow-Stream-Id"))
	require.Equal(t, uiChunk{Type: "start", MessageID: chat + "-1"}, chunks[0], "the message is named after its turn's job")
	require.Equal(t, []string{"start",
		"start-step", "tool-input-start", "tool-input-delta", "tool-input-available", "tool-output-available", "finish-step",
		"start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"}, foldedTypes(chunks))
	events := e.grpcTurn(streamID)
	requireMapped(t, events, chunks)
	require.Equal(t, "stop", chunks[len(chunks)-1].FinishReason)

	// The client sends the chat's messages again, with the answer and the
	// next question: the Conversation holds the history, the last message
	// is what it answers.
	answer := uiMessage{ID: chat + "-1", Role: "assistant", Parts: []map[string]any{{"type": "text", "text": "The result is 50."}}}
	chunks, _ = e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", first, answer, userMessage("What is 6 * 7?")))
	require.Equal(t, chat+"-2", chunks[0].MessageID)
	requireMapped(t, e.grpcTurn(contract.TurnWorkflowID("demo", chat+"-2")), chunks)
	v, err := e.Client().QueryWorkflow(context.Background(), contract.ConversationWorkflowID("demo", chat), "", contract.QueryTranscript)
	require.NoError(t, err)
	var tr agent.Transcript
	require.NoError(t, v.Get(&tr))
	require.Equal(t, 2, tr.Turns)
	require.Equal(t, "What is 12.5 * 4?", tr.Window[0].Prompt)
	require.Equal(t, "The result is 42.", tr.Window[1].Output)

	// Nothing runs now: a reconnecting client has nothing to resume.
	require.Eventually(t, func() bool {
		code, _ := e.rawCall("GET", "/v1/ui/chat/"+chat+"/stream", e.user)
		return code == http.StatusNoContent
	}, time.Minute, 50*time.Millisecond)
}

// rawCall sends a request without a body and returns its status and body.
func (e *httpEnv) rawCall(method, path, token string) (int, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := e.sseCall(ctx, method, path, token, "", nil)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, data
}

// approvalAnswer is the assistant message as the client holds it once
// its user has answered the approval request (addToolApprovalResponse).
func approvalAnswer(id, tool, callID, approvalID string, approved bool) uiMessage {
	return uiMessage{ID: id, Role: "assistant", Parts: []map[string]any{
		{"type": "step-start"},
		{"type": "tool-" + tool, "toolCallId": callID, "state": "approval-responded", "input": map[string]any{"expression": "6 * 7"},
			"approval": map[string]any{"id": approvalID, "approved": approved, "reason": "checked"}},
	}}
}

// TestAISDKApproval: a call waiting for approval ends the message with
// the SDK's approval request; resuming the chat gives the same message;
// a user's token cannot answer it, another tenant cannot find it, and
// the chat takes no new message meanwhile; the approver's answer, as the
// SDK sends it, decides the call through Approve and the same message
// goes on to its end.
func TestAISDKApproval(t *testing.T) {
	e := newHTTPEnv(t)
	chat := "careful-" + testserver.RandomID()
	question := userMessage("Carefully, what is 6 * 7?")
	chunks, _ := e.uiStream("POST", "/v1/ui/chat", e.all, uiBody(t, chat, "careful", question))
	job := chat + "-1"
	require.Equal(t, job, chunks[0].MessageID)
	last := chunks[len(chunks)-1]
	require.Equal(t, "finish", last.Type)
	require.Equal(t, "tool-calls", last.FinishReason)
	request := chunks[len(chunks)-2]
	require.Equal(t, "tool-approval-request", request.Type)
	streamID := contract.TurnWorkflowID("demo", job)
	pending := e.waitPending(streamID)
	require.Equal(t, pending.GetCallId(), request.ToolCallID)
	require.Equal(t, pending.GetApprovalId(), request.ApprovalID, "the approval is named by the call's approval id")
	for _, c := range chunks {
		if c.Type == "tool-input-available" {
			require.Equal(t, "careful_calculator", c.ToolName)
			require.JSONEq(t, `{"expression": "6 * 7"}`, string(c.Input))
		}
	}

	// A reconnecting client gets the same message.
	resumed, _ := e.uiStream("GET", "/v1/ui/chat/"+chat+"/stream", e.user, "")
	require.Equal(t, chunks, resumed)

	answer := func(approved bool) string {
		return uiBody(t, chat, "careful", question, approvalAnswer(job, "careful_calculator", request.ToolCallID, request.ApprovalID, approved))
	}
	p := e.problem("POST", "/v1/ui/chat", e.user, answer(true), http.StatusForbidden)
	require.Contains(t, p.Detail, "needs the role approver")
	p = e.problem("POST", "/v1/ui/chat", e.rival, answer(true), http.StatusNotFound)
	require.Equal(t, agent.ErrTypeNotFound, p.Title)
	p = e.problem("POST", "/v1/ui/chat", e.all, uiBody(t, chat, "careful", question, userMessage("And 1 + 1?")), http.StatusConflict)
	require.Contains(t, p.Detail, "still answering message \""+job+"\"")
	p = e.problem("POST", "/v1/ui/chat", e.all, uiBody(t, chat, "careful", question,
		approvalAnswer("other-1", "careful_calculator", request.ToolCallID, request.ApprovalID, true)), http.StatusNotFound)
	require.Contains(t, p.Detail, "is not an answer in chat")
	require.Equal(t, pending.GetCallId(), e.waitPending(streamID).GetCallId(), "still waiting")

	rest, _ := e.uiStream("POST", "/v1/ui/chat", e.all, answer(true))
	require.Equal(t, uiChunk{Type: "start", MessageID: job}, rest[0], "the same message goes on")
	require.Equal(t, []string{"start", "tool-approval-response", "tool-output-available", "finish-step", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"},
		foldedTypes(rest))
	require.Equal(t, request.ApprovalID, rest[1].ApprovalID, "the decision, as the stream of the turn records it")
	require.Equal(t, request.ToolCallID, rest[2].ToolCallID)
	require.JSONEq(t, `"42"`, string(rest[2].Output))

	events := e.grpcTurn(streamID)
	whole := append(append([]uiChunk{}, chunks[:len(chunks)-1]...), rest[1:]...)
	requireMapped(t, events, whole)
	recs, err := e.Store().Approvals(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "al", recs[0].Approver, "the token's name")
	require.Equal(t, "checked", recs[0].Reason)

	// Answered twice: the call was decided, and its turn has ended.
	p = e.problem("POST", "/v1/ui/chat", e.all, answer(false), http.StatusConflict)
	require.Contains(t, p.Detail, "has ended")
}

// TestAISDKRefusals: what the chat routes refuse is a problem with its
// status, and nothing is started.
func TestAISDKRefusals(t *testing.T) {
	e := newHTTPEnv(t)
	chat := "ref-" + testserver.RandomID()
	hello := userMessage("Hello")
	for _, tc := range []struct {
		name, token, body string
		status            int
		detail            string
	}{
		{"no token", "", uiBody(t, chat, "assistant", hello), http.StatusUnauthorized, "bearer token"},
		{"not JSON", e.user, `{"id": "` + chat + `", "messages": [`, http.StatusBadRequest, "not JSON"},
		{"an unknown member", e.user, `{"id": "` + chat + `", "model": "assistant", "messages": []}`, http.StatusBadRequest, `unknown member "model"`},
		{"no message", e.user, `{"id": "` + chat + `", "messages": []}`, http.StatusBadRequest, "messages is empty"},
		{"the assistant's last", e.user, uiBody(t, chat, "assistant", hello, uiMessage{ID: "a", Role: "assistant", Parts: []map[string]any{}}), http.StatusBadRequest, "answers no tool approval"},
		{"an unknown agent", e.user, uiBody(t, chat, "nobody", hello), http.StatusNotFound, "nobody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := e.problem("POST", "/v1/ui/chat", tc.token, tc.body, tc.status)
			require.Contains(t, strings.ToLower(p.Detail), strings.ToLower(tc.detail))
		})
	}
	_, err := e.Client().DescribeWorkflowExecution(context.Background(), contract.ConversationWorkflowID("demo", chat), "")
	require.Error(t, err, "no conversation was started")

	// A chat keeps its agent.
	e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", hello))
	p := e.problem("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "careful", hello), http.StatusConflict)
	require.Contains(t, p.Detail, `conversation with agent "assistant"`)

	// The resume route: nothing running is 204, for a chat of another
	// tenant too, which it cannot tell from none.
	for _, tok := range []string{e.user, e.rival} {
		code, body := e.rawCall("GET", "/v1/ui/chat/never-"+testserver.RandomID()+"/stream", tok)
		require.Equal(t, http.StatusNoContent, code, "%s", body)
	}
	p = e.problem("GET", "/v1/ui/chat/"+chat+"/stream?after_index=3", e.user, "", http.StatusBadRequest)
	require.Contains(t, p.Detail, `unknown query parameter "after_index"`)
	// Which AI SDK the client runs: 5, 6 or 7, on both routes.
	p = e.problem("GET", "/v1/ui/chat/"+chat+"/stream?ai_sdk=8", e.user, "", http.StatusBadRequest)
	require.Contains(t, p.Detail, `ai_sdk="8": want the AI SDK's major version, 5, 6 or 7`)
	p = e.problem("POST", "/v1/ui/chat?ai_sdk=7&model=x", e.user, uiBody(t, chat, "assistant", hello), http.StatusBadRequest)
	require.Contains(t, p.Detail, `unknown query parameter "model"`)
	e.problem("GET", "/v1/ui/chat/"+chat+"/stream", "", "", http.StatusUnauthorized)
	p = e.problem("PUT", "/v1/ui/chat", e.user, "", http.StatusMethodNotAllowed)
	require.Contains(t, p.Detail, fmt.Sprintf("%s does not take PUT", "/v1/ui/chat"))
	require.NotContains(t, string(e.log.Bytes()), e.user, "no token in the log")
}

// TestAISDKClient: the AI SDK 7's own client code — DefaultChatTransport,
// which useChat uses, its api asking for the AI SDK 7 stream (?ai_sdk=7),
// and readUIMessageStream — reads the chat endpoint's
// streams into the messages a React app would show: a one-tool answer, a
// chat's second answer, an approval requested and, answered as
// addToolApprovalResponse answers it, the same message completed; and
// finds nothing to resume. It needs Node.js (with npm) to run the SDK:
// without it the test skips, except under CI.
func TestAISDKClient(t *testing.T) {
	dir := nodeClient(t, "aisdk", "ai")
	e := newHTTPEnv(t)
	in, err := json.Marshal(map[string]string{"api": e.api + "/v1/ui/chat?ai_sdk=7", "token": e.all,
		"chat": "sdk-" + testserver.RandomID(), "approvalChat": "sdk-careful-" + testserver.RandomID()})
	require.NoError(t, err)
	out := runNode(t, dir, "chat.mjs", in)
	var got struct {
		First, Second, Asked, Decided sdkMessage
		Resumed                       *string
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	text, types := sdkMessage.text, sdkMessage.types

	require.Equal(t, "assistant", got.First.Role)
	require.Equal(t, []string{"step-start ", "tool-calculator output-available", "step-start ", "text done"}, types(got.First))
	require.JSONEq(t, `{"expression": "12.5 * 4"}`, string(got.First.Parts[1].Input))
	require.JSONEq(t, `"50"`, string(got.First.Parts[1].Output))
	require.Equal(t, "The result is 50.", text(got.First))
	require.Positive(t, got.First.Metadata.Usage.TotalTokens)
	require.NotEqual(t, got.First.ID, got.Second.ID)
	require.Equal(t, "The result is 42.", text(got.Second))

	require.Equal(t, []string{"step-start ", "tool-careful_calculator approval-requested"}, types(got.Asked))
	call := got.Asked.Parts[1]
	require.Regexp(t, `^apr_[0-9a-f]{24}$`, call.Approval.ID, "the call's approval id, which the SDK's answer carries back")
	require.Equal(t, got.Asked.ID, got.Decided.ID, "the same message, completed")
	require.Equal(t, []string{"step-start ", "tool-careful_calculator output-available", "step-start ", "text done"}, types(got.Decided))
	require.JSONEq(t, `"42"`, string(got.Decided.Parts[1].Output))
	require.True(t, *got.Decided.Parts[1].Approval.Approved)
	require.Equal(t, "The result is 42.", text(got.Decided))
	require.Nil(t, got.Resumed, "nothing to resume: 204")
}

// sdkMessage is a UIMessage as the AI SDK's client code built it.
type sdkMessage struct {
	ID       string    `json:"id"`
	Role     string    `json:"role"`
	Parts    []sdkPart `json:"parts"`
	Metadata struct {
		Usage agent.Usage `json:"usage"`
	} `json:"metadata"`
}

type sdkPart struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Text       string          `json:"text"`
	Parts      []sdkPart       `json:"parts"` // a steering-message's
	State      string          `json:"state"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
	} `json:"approval"`
}

// text is the message's text: its text parts'.
func (m sdkMessage) text() string { return m.partText("text") }

func (m sdkMessage) partText(kind string) string {
	var s strings.Builder
	for _, p := range m.Parts {
		if p.Type == kind {
			s.WriteString(p.Text)
		}
	}
	return s.String()
}

// types is each part's type and state.
func (m sdkMessage) types() []string {
	var out []string
	for _, p := range m.Parts {
		out = append(out, p.Type+" "+p.State)
	}
	return out
}

// deltas are the deltas of the chunks of type kind (text-delta,
// reasoning-delta), in order.
func deltas(chunks []uiChunk, kind string) []string {
	out := []string{}
	for _, c := range chunks {
		if c.Type == kind {
			out = append(out, c.Delta)
		}
	}
	return out
}

// logTexts are the texts of the turn's own events of kind, every
// attempt's, in log order.
func logTexts(events []agent.Event, kind agent.EventKind) []string {
	out := []string{}
	for _, ev := range events {
		if ev.Kind == kind && ev.Child == nil {
			out = append(out, ev.Text)
		}
	}
	return out
}

// storyScript is a model script whose rules tell storyText paced word by
// word, once whole and once cut part-way and retried.
const storyScript = `
pacing: {chunk_words: 1, delay_ms: 20}
rules:
  - name: tell
    when: {user: '^tell a story$'}
    reply: {text: '` + storyText + `'}
  - name: cut
    when: {user: '^cut a story$'}
    fault: {cut_after_chunks: 25, times: 1}
    reply: {reasoning: 'The user wants the story told exactly once.', text: '` + storyText + `'}
  - name: cut again
    when: {user: '^cut it again$'}
    fault: {cut_after_chunks: 25, times: 1}
    reply: {text: '` + storyText + `'}
  - name: cat
    when: {user: '^now make it about a cat$'}
    reply: {text: 'A story about a cat.'}
  - name: end
    when: {user: '^and then\?$'}
    reply: {text: 'The end.'}
`

// TestAISDKLive: a client of AI SDK 7 (DefaultChatTransport with
// ?ai_sdk=7, readUIMessageStream) gets a model call's text token by
// token, and a call cut part-way and retried as reset-step: the message
// ends with the retry's text only, which is the stored result.
func TestAISDKLive(t *testing.T) {
	dir := nodeClient(t, "aisdk", "ai")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = storyScript
		o.StreamInterval = 100 * time.Millisecond
	})
	told, cut := "told-"+testserver.RandomID(), "cut-"+testserver.RandomID()
	in, err := json.Marshal(map[string]any{"api": e.api + "/v1/ui/chat?ai_sdk=7", "token": e.user, "chats": []map[string]string{
		{"chat": told, "agent": "assistant", "prompt": "tell a story"},
		{"chat": cut, "agent": "assistant", "prompt": "cut a story"},
	}})
	require.NoError(t, err)
	var got []struct {
		Chunks  []uiChunk  `json:"chunks"`
		At      []float64  `json:"at"` // ms after the response's head
		Message sdkMessage `json:"message"`
	}
	out := runNode(t, dir, "live.mjs", in)
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Len(t, got, 2)
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")

	for i, chat := range []string{told, cut} {
		streamID := contract.TurnWorkflowID("demo", chat+"-1")
		events := e.grpcTurn(streamID)
		stored, err := e.Store().Result(context.Background(), "demo", chat+"-1")
		require.NoError(t, err)
		chunks, m := got[i].Chunks, got[i].Message
		require.Equal(t, "[DONE]", chunks[len(chunks)-1].Type)
		require.Equal(t, storyText, stored.Output)
		require.Equal(t, stored.Output, m.text(), "what the client shows is the stored result")
		require.Equal(t, logTexts(events, agent.EventToken), deltas(chunks, "text-delta"), "every token event, once, as it was logged")
		require.Equal(t, agent.ReplayReasoning(events), m.partText("reasoning"))
		t.Logf("%s: %d text deltas, %d token events", chat, len(deltas(chunks, "text-delta")), len(logTexts(events, agent.EventToken)))
	}

	told0 := got[0]
	require.Greater(t, len(deltas(told0.Chunks, "text-delta")), 1, "the answer streams in more than one delta")
	// Token by token: the model paces its 63 words over 1.26 s, and the
	// deltas arrive over that time, not at once when the call answers.
	first, last := -1.0, -1.0
	for i, c := range told0.Chunks {
		if c.Type == "text-delta" {
			last = told0.At[i]
			if first < 0 {
				first = last
			}
		}
	}
	t.Logf("text deltas arrived from %.0f ms to %.0f ms after the response's head", first, last)
	require.Greater(t, last-first, 300.0, "the deltas arrive as the model streams")
	require.Equal(t, []string{"step-start ", "text done"}, told0.Message.types())
	require.False(t, hasChunk(told0.Chunks, func(c uiChunk) bool { return c.Type == "reset-step" }))

	retried := got[1]
	require.Equal(t, []string{"step-start ", "reasoning done", "text done"}, retried.Message.types(), "one step, the retry's parts only")
	resets := 0
	for i, c := range retried.Chunks {
		if c.Type == "reset-step" {
			resets++
			require.NotEqual(t, "start-step", retried.Chunks[i+1].Type, "the step goes on: no second step-start")
		}
	}
	require.Equal(t, 1, resets)
	before := strings.Join(deltas(retried.Chunks[:slices.IndexFunc(retried.Chunks, func(c uiChunk) bool { return c.Type == "reset-step" })], "text-delta"), "")
	require.NotEmpty(t, before, "the cut attempt streamed text the client showed until the reset")
	require.True(t, strings.HasPrefix(storyText, before))
}

// TestAISDKSteered: a message steered into a chat's running turn from
// another door (gRPC SendMessage, on_busy steer) cuts the story short
// and is, for AI SDK 7, a steering-message part of the answer between
// its steps, where the SDK puts one; the chat's next request, which
// sends that message back, is taken.
func TestAISDKSteered(t *testing.T) {
	dir := nodeClient(t, "aisdk", "ai")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = storyScript
		o.StreamInterval = 100 * time.Millisecond
	})
	chat := "steered-" + testserver.RandomID()
	in, err := json.Marshal(map[string]any{"api": e.api + "/v1/ui/chat?ai_sdk=7", "token": e.user, "chats": []map[string]string{
		{"chat": chat, "agent": "assistant", "prompt": "tell a story", "then": "and then?"},
	}})
	require.NoError(t, err)
	wait := startNode(t, dir, "live.mjs", in)

	// Once the story streams, steer a message into its turn.
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.user), time.Minute)
	defer cancel()
	streamID := contract.TurnWorkflowID("demo", chat+"-1")
	require.Eventually(t, func() bool {
		_, err := e.Client().DescribeWorkflowExecution(ctx, streamID, "")
		return err == nil
	}, time.Minute, 20*time.Millisecond, "the chat's turn starts")
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	errStreams := errors.New("it streams")
	err = e.Follower().Follow(fctx, streamID, 0, func(ev agent.Event) error {
		if ev.Kind == agent.EventToken {
			return errStreams
		}
		return nil
	})
	require.ErrorIs(t, err, errStreams)
	sent, err := pb.NewAgentServiceClient(e.Conn).SendMessage(ctx, &pb.SendMessageRequest{SessionId: chat, AgentId: "assistant",
		Prompt: "now make it about a cat", OnBusy: agent.OnBusySteer})
	require.NoError(t, err)
	require.True(t, sent.GetSteered(), "the story was still streaming")

	var got []struct {
		Message sdkMessage `json:"message"`
		Next    sdkMessage `json:"next"`
	}
	out := wait()
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	m := got[0].Message
	require.Equal(t, []string{"step-start ", "text done", "steering-message ", "step-start ", "text done"}, m.types())
	steering := m.Parts[2]
	require.Equal(t, sent.GetJobId(), steering.ID)
	require.Equal(t, []sdkPart{{Type: "text", Text: "now make it about a cat"}}, steering.Parts)
	// The message cut the story short: the answer is the story as far as
	// it got, then the new one.
	story, ok := strings.CutSuffix(m.text(), "A story about a cat.")
	require.True(t, ok, "%q", m.text())
	require.True(t, strings.HasPrefix(storyText, story) && len(story) < len(storyText), "the story cut short: %q", story)
	stored, err := e.Store().Result(ctx, "demo", chat+"-1")
	require.NoError(t, err)
	require.Equal(t, "A story about a cat.", stored.Output, "the answer, having read the message")
	require.Equal(t, "The end.", got[0].Next.text(), "the chat goes on with the steered message in its history")
}

// TestAISDKClient6: AI SDK 6's own client (testdata/aisdk6) reads the
// stream a client gets when it does not ask for AI SDK 7's: a model call
// cut part-way and retried ends, as before AI SDK 7, with the retry's
// text once, the stored result. The same client refuses AI SDK 7's
// stream of such a call (reset-step is not a chunk it knows), which is
// why that stream is asked for.
func TestAISDKClient6(t *testing.T) {
	dir := nodeClient(t, "aisdk6", "ai")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = storyScript
		o.StreamInterval = 100 * time.Millisecond
	})
	chat := "six-" + testserver.RandomID()
	in, err := json.Marshal(map[string]string{"api": e.api + "/v1/ui/chat", "token": e.user, "chat": chat, "v7Chat": "seven-" + testserver.RandomID(),
		"agent": "assistant", "prompt": "cut a story", "v7Prompt": "cut it again"})
	require.NoError(t, err)
	var got struct {
		Message sdkMessage `json:"message"`
		V7Error *string    `json:"v7Error"`
	}
	out := runNode(t, dir, "held.mjs", in)
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")

	stored, err := e.Store().Result(context.Background(), "demo", chat+"-1")
	require.NoError(t, err)
	require.Equal(t, storyText, stored.Output)
	require.Equal(t, []string{"step-start ", "reasoning done", "text done"}, got.Message.types())
	require.Equal(t, stored.Output, got.Message.text())
	require.NotNil(t, got.V7Error, "AI SDK 6 reads AI SDK 7's stream of a retried call")
	require.Contains(t, *got.V7Error, "reset-step")
}

// TestAISDKResume: the exact-under-faults check of the AI SDK door. An
// AI SDK 7 chat whose connection breaks mid-answer resumes as the SDK
// does (resumeStream: GET /v1/ui/chat/{id}/stream, a replay from the
// message's start) while the model call is cut part-way and retried:
// the replay gives again exactly what the client had, then the rest, and
// every token event once — 0 duplicate, 0 missing — and the message ends
// as the stored result, once.
func TestAISDKResume(t *testing.T) {
	dir := nodeClient(t, "aisdk", "ai")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = storyScript
		o.StreamInterval = 100 * time.Millisecond
	})
	chat := "resume-" + testserver.RandomID()
	in, err := json.Marshal(map[string]any{"api": e.api + "/v1/ui/chat?ai_sdk=7", "token": e.user, "chat": chat, "agent": "assistant",
		"prompt": "cut a story", "cut": 3})
	require.NoError(t, err)
	var got struct {
		Broken struct {
			Status   string       `json:"status"`
			Messages []sdkMessage `json:"messages"`
		} `json:"broken"`
		Status   string       `json:"status"`
		Messages []sdkMessage `json:"messages"`
		Errors   []string     `json:"errors"`
		Chunks   [][]uiChunk  `json:"chunks"`
	}
	out := runNode(t, dir, "resume.mjs", in)
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)

	job := chat + "-1"
	stored, err := e.Store().Result(context.Background(), "demo", job)
	require.NoError(t, err)
	require.Equal(t, storyText, stored.Output)
	events := e.grpcTurn(contract.TurnWorkflowID("demo", job))

	// The connection broke mid-answer: the chat says so, and shows part of it.
	require.Equal(t, "error", got.Broken.Status)
	require.Len(t, got.Errors, 1)
	require.Contains(t, got.Errors[0], "network error")
	require.Len(t, got.Broken.Messages, 2)
	partial := got.Broken.Messages[1]
	require.Equal(t, job, partial.ID)
	require.NotEmpty(t, partial.text())
	require.Less(t, len(partial.text()), len(storyText), "the connection broke before the end")

	// The resumed chat holds the message once, as it was stored.
	require.Equal(t, "ready", got.Status)
	require.Len(t, got.Messages, 2, "the question and one answer")
	answer := got.Messages[1]
	require.Equal(t, job, answer.ID)
	require.Equal(t, []string{"step-start ", "reasoning done", "text done"}, answer.types())
	require.Equal(t, stored.Output, answer.text())

	// The replay begins with every chunk the client had, in order.
	require.Len(t, got.Chunks, 2, "the answer, and its resume")
	had, replay := got.Chunks[0], got.Chunks[1]
	require.Greater(t, len(replay), len(had))
	require.Equal(t, had, replay[:len(had)], "the replay gives again what the client had")
	require.Equal(t, "[DONE]", replay[len(replay)-1].Type)

	// Every token event once, in order: none duplicated, none missing.
	want, sent := logTexts(events, agent.EventToken), deltas(replay, "text-delta")
	require.Equal(t, want, sent)
	require.True(t, hasChunk(replay, func(c uiChunk) bool { return c.Type == "reset-step" }), "the cut call's retry")
	t.Logf("resumed after %d of %d text deltas; %d token events in the log, %d sent; duplicates 0, missing 0",
		len(deltas(had, "text-delta")), len(sent), len(want), len(sent))
}

// TestAISDKRetried: a model call cut part-way and retried streams its
// reply to a chat once — one text part, one reasoning part, none of the
// voided attempt — though the log holds both attempts.
func TestAISDKRetried(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: cut
    when: {user: '^cut a story$'}
    fault: {cut_after_chunks: 25, times: 1}
    reply: {reasoning: 'The user wants the story told exactly once.', text: '` + storyText + `'}
`
	})
	chat := "retry-" + testserver.RandomID()
	chunks, _ := e.uiStream("POST", "/v1/ui/chat", e.user, uiBody(t, chat, "assistant", userMessage("cut a story")))
	require.Equal(t, 2, e.Model.Served("cut"), "cut once, then answered")
	require.Equal(t, []string{"start", "start-step", "reasoning-start", "reasoning-delta", "reasoning-end", "text-start", "text-delta", "text-end", "finish-step", "finish"},
		foldedTypes(chunks))
	var text, reasoning strings.Builder
	for _, c := range chunks {
		switch c.Type {
		case "text-delta":
			text.WriteString(c.Delta)
		case "reasoning-delta":
			reasoning.WriteString(c.Delta)
		}
	}
	require.Equal(t, storyText, text.String())
	events := e.grpcTurn(contract.TurnWorkflowID("demo", chat+"-1"))
	require.Equal(t, agent.ReplayReasoning(events), reasoning.String())
	voided := false
	for _, ev := range events {
		voided = voided || ev.Kind == agent.EventStatus && ev.Status == agent.StreamRetrying && ev.VoidFrom > 0
	}
	require.True(t, voided, "the cut attempt streamed what the retry voided")
	requireMapped(t, events, chunks)
}
