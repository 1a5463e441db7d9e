package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// crossScript is httpScript whose answer after a tool call takes a
// moment (the model thinks 2 s): the turn is still running when a client
// that was not there when it started comes to follow it.
var crossScript = strings.Replace(httpScript, "reply: {text: 'The result is $1.'}", "reply: {text: 'The result is $1.', delay_ms: 2000}", 1)

// crossCatalog is httpCatalogs' tenant demo with its careful agent, whose
// calculator needs approval, exposed over A2A and MCP.
var crossCatalog = strings.Replace(httpCatalogs[0], "approval_timeout_sec: 300}", "approval_timeout_sec: 300}\n    expose: [a2a, mcp]", 1)

// a2aV1 sends an A2A 1.0 JSON-RPC request to agentID's endpoint, as a
// 1.0 client does (A2A-Version: 1.0), and returns its result.
func (e *httpEnv) a2aV1(agentID, token, method string, params any) json.RawMessage {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(e.t, err)
	req, err := http.NewRequest(http.MethodPost, e.api+a2adoor.A2APrefix+agentID, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	require.Nil(e.t, out.Error, "%s: %+v", method, out.Error)
	return out.Result
}

// TestOneTurnEveryDoor: one turn, one answer, on every door. A turn
// started by an A2A 1.0 message in a context (a session) waits for an
// approval, input-required, under a task id that is its stream id; MCP's
// tasks/get on that id is not found (an MCP task is its creator's), and
// the HTTP API's approver decides it; the AI SDK's own chat,
// opened on the context as its chat id, resumes the turn it did not start
// and follows it to its end; GET /v1/responses/{stream id} reads it
// completed. A2A's GetTask artifact, the AI SDK's
// message, the response's output text, gRPC GetResult and /v1/results
// are one answer: the stored result's.
func TestOneTurnEveryDoor(t *testing.T) {
	dir := nodeClient(t, "aisdk", "ai")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs = crossScript, []string{crossCatalog, httpCatalogs[1]}
	})
	mcp := &tasksEnv{httpEnv: e, other: e.api}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The AI SDK's chat is loaded now and waits to be told which chat to
	// follow, so that it follows the moment the approval is decided.
	follow := startFollow(t, ctx, dir)

	// (1) A2A 1.0: a message in a context; the task waits for input.
	chat := "cross-" + testserver.RandomID()
	sent := v1TaskOf(t, e.a2aV1("careful", e.user, "SendMessage", map[string]any{"message": map[string]any{
		"messageId": testserver.RandomID(), "role": "ROLE_USER", "contextId": chat,
		"parts": []map[string]any{{"text": "Carefully, what is 6 * 7?"}}}}), true)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", sent.Status.State)
	require.Equal(t, chat, sent.ContextID)
	streamID := sent.ID
	require.True(t, strings.HasPrefix(streamID, "turn/demo/"+chat), "the task id is the turn's stream id, of the context's session: %s", streamID)

	// (2) MCP: a task is its creator's, and this turn is A2A's: the same
	// id is not found there, for its user as for an approver. The HTTP
	// API's approver decides the approval.
	for _, token := range []string{e.user, e.all} {
		a := mcp.rpc(e.api, token, "tasks/get", map[string]any{"taskId": streamID})
		require.NotNil(t, a.Error, "another door's turn is not an MCP task")
		require.Equal(t, -32602, a.Error.Code)
	}
	pending := e.waitPending(streamID)
	require.Equal(t, "careful_calculator", pending.GetTool())
	var ack pb.ApproveResponse
	e.ok("POST", "/v1/"+streamID+"/approvals/"+url.PathEscape(pending.GetCallId()), e.approver,
		`{"approval_id": "`+pending.GetApprovalId()+`", "approved": true, "reason": "checked"}`, &ack)

	// (3) The AI SDK: a new chat of the context's id resumes the turn,
	// which is thinking over its answer, and follows it to its end.
	decided := time.Now()
	chat7 := follow(map[string]string{"api": e.api + "/v1/ui/chat?ai_sdk=7", "token": e.user, "chat": chat})
	t.Logf("the AI SDK's chat followed the turn to its end %v after the approval", time.Since(decided).Round(time.Millisecond))
	require.Empty(t, chat7.Errors)
	require.Equal(t, "ready", chat7.Status)
	require.Len(t, chat7.Chunks, 1, "one response: the turn was running (not 204)")
	chunks := chat7.Chunks[0]
	job := streamID[len("turn/demo/"):]
	require.Equal(t, uiChunk{Type: "start", MessageID: job}, chunks[0], "the message is the turn's")
	require.Equal(t, "[DONE]", chunks[len(chunks)-1].Type, "followed to the end")
	finish := chunks[len(chunks)-2]
	require.Equal(t, "finish", finish.Type)
	require.Equal(t, "stop", finish.FinishReason, "not paused at the approval: the message ends with the turn")
	require.Len(t, chat7.Messages, 1)
	sdk := chat7.Messages[0]
	require.Equal(t, job, sdk.ID)
	require.Equal(t, []string{"step-start ", "tool-careful_calculator output-available", "step-start ", "text done"}, sdk.types())
	events := e.grpcTurn(streamID)
	require.Equal(t, logTexts(events, agent.EventToken), deltas(chunks, "text-delta"), "every token event once")

	// (4) The Responses API: the stream id is the response id.
	oai := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.user), option.WithMaxRetries(0))
	resp, err := oai.Responses.Get(ctx, streamID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, streamID, resp.ID)
	require.Equal(t, responses.ResponseStatusCompleted, resp.Status)
	var items []string
	for _, item := range resp.Output {
		items = append(items, item.Type)
	}
	require.Equal(t, []string{"mcp_approval_request", "mcp_call", "message"}, items)
	call := resp.Output[1].AsMcpCall()
	require.Equal(t, "careful_calculator", call.Name)
	require.Equal(t, "completed", call.Status)
	require.Equal(t, "42", call.Output, "the call ran, approved")

	// Back on A2A: the task completed.
	got := v1TaskOf(t, e.a2aV1("careful", e.user, "GetTask", map[string]any{"id": streamID}), false)
	require.Equal(t, "TASK_STATE_COMPLETED", got.Status.State)

	// The stored result, as gRPC GetResult and /v1/results give it.
	stored, err := e.Store().Result(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, stored.Status)
	require.Equal(t, "The result is 42.", stored.Output)
	res, err := pb.NewAgentServiceClient(e.Conn).GetResult(grpcAs(ctx, e.user), &pb.GetResultRequest{ResultRef: stored.ResultRef})
	require.NoError(t, err)
	var byHTTP pb.TurnResult
	e.ok("GET", "/v1/results?result_ref="+url.QueryEscape(stored.ResultRef), e.user, "", &byHTTP)

	for door, answer := range map[string]string{
		"A2A GetTask":            got.answer(),
		"AI SDK resume":          sdk.text(),
		"GET /v1/responses/{id}": resp.OutputText(),
		"gRPC GetResult":         res.GetOutput(),
		"GET /v1/results":        byHTTP.GetOutput(),
	} {
		require.Equal(t, stored.Output, answer, "%s gives the stored result", door)
	}

	recs, err := e.Store().Approvals(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, recs, 1, "decided once")
	require.Equal(t, "ann", recs[0].Approver, "by the approver token's holder")
	require.Equal(t, "approved", recs[0].Outcome)
	part := sdk.Parts[1]
	require.NotNil(t, part.Approval, "the AI SDK's tool part carries the decision")
	require.Equal(t, recs[0].ApprovalID, part.Approval.ID)
	require.NotNil(t, part.Approval.Approved, "decided")
	require.True(t, *part.Approval.Approved)
}

// followedChat is what follow.mjs's chat built: its status, messages and
// errors, and the chunks of each response it read.
type followedChat struct {
	Status   string       `json:"status"`
	Messages []sdkMessage `json:"messages"`
	Errors   []string     `json:"errors"`
	Chunks   [][]uiChunk  `json:"chunks"`
}

// startFollow starts testdata/aisdk's follow.mjs, which loads the AI SDK
// and then reads its input; the function it returns sends the input and
// waits for what the chat built.
func startFollow(t *testing.T, ctx context.Context, dir string) func(in any) followedChat {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "follow.mjs")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return func(in any) followedChat {
		t.Helper()
		require.NoError(t, json.NewEncoder(stdin).Encode(in))
		require.NoError(t, stdin.Close())
		require.NoError(t, cmd.Wait(), "%s", stderr.String())
		var out followedChat
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "%s", stdout.Bytes())
		return out
	}
}

// v1TaskOf reads an A2A 1.0 task from a result: SendMessage's wraps it
// ({"task": …}), GetTask's is the task.
func v1TaskOf(t *testing.T, raw json.RawMessage, wrapped bool) a2aTask {
	t.Helper()
	if wrapped {
		var out struct {
			Task *a2aTask `json:"task"`
		}
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
		require.NotNil(t, out.Task, "a task: %s", raw)
		return *out.Task
	}
	var task a2aTask
	require.NoError(t, json.Unmarshal(raw, &task), "%s", raw)
	return task
}
