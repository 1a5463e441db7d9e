package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/testserver"
)

// mcpSession is a session opened with raw JSON-RPC, of one protocol
// version.
type mcpSession struct {
	t                   *testing.T
	api, token, version string
	id                  string
	next                int
}

// openMCPSession initializes a session of version with token.
func openMCPSession(t *testing.T, api, token, version string) *mcpSession {
	t.Helper()
	s := &mcpSession{t: t, api: api, token: token, version: version}
	resp := s.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": version,
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "agentflow-test", "version": "1"}}})
	s.id = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, s.id, "a session")
	s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return s
}

// post sends one message of the session.
func (s *mcpSession) post(msg map[string]any) *http.Response {
	s.t.Helper()
	body, err := json.Marshal(msg)
	require.NoError(s.t, err)
	req, err := http.NewRequest(http.MethodPost, s.api+mcpdoor.MCPPath, bytes.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	return resp
}

// call sends a request of the session and reads its answer.
func (s *mcpSession) call(method string, params map[string]any) mcpAnswer {
	s.t.Helper()
	s.next++
	resp := s.post(map[string]any{"jsonrpc": "2.0", "id": s.next, "method": method, "params": params})
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
				raw = []byte(data)
			}
		}
	}
	var a mcpAnswer
	require.NoError(s.t, json.Unmarshal(raw, &a), "HTTP %d: %s", resp.StatusCode, raw)
	return a
}

// sessionTask is a task as a 2025-11-25 session carries it.
type sessionTask struct {
	TaskID, Status, StatusMessage, CreatedAt string
	TTL                                      *int64
	PollInterval                             int64
}

// TestMCPSessionTasks: 2025-11-25's tasks in a session, with raw JSON-RPC:
// a task-augmented tools/call answers a CreateTaskResult at once, the
// task is read working or completed, tasks/result answers the call's
// result with the related-task _meta, tasks/list lists it. Bad input on
// every method gets MCP's own JSON-RPC error and changes nothing; a
// session of an older version has no tasks, and its task-augmented calls
// are calls.
func TestMCPSessionTasks(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{
		Script: mcpTasksScript, Catalogs: mcpTasksCatalog, HTTPAPI: true,
		Tokens: map[string]string{"tok-demo": "demo:user+approver:ana", "tok-bo": "demo:user+approver:bo", "tok-other": "other:user"},
	})
	api := "http://" + srv.HTTPAPIAddr()
	s := openMCPSession(t, api, "tok-demo", "2025-11-25")

	a := s.call("tools/call", map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": "What is 6 * 7?"},
		"task": map[string]any{"ttl": 60000}})
	require.Nil(t, a.Error)
	var created struct {
		Task sessionTask
		Meta map[string]string `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(a.Result, &created), "%s", a.Result)
	task := created.Task
	require.Equal(t, "working", task.Status)
	require.True(t, strings.HasPrefix(task.TaskID, "turn/demo/mcp-task-"), task.TaskID)
	require.Nil(t, task.TTL)
	require.Equal(t, int64(1000), task.PollInterval)
	require.Contains(t, created.Meta["io.modelcontextprotocol/model-immediate-response"], task.TaskID)

	other := openMCPSession(t, api, "tok-other", "2025-11-25")
	bo := openMCPSession(t, api, "tok-bo", "2025-11-25")
	old := openMCPSession(t, api, "tok-demo", "2025-06-18")
	for _, tc := range []struct {
		name    string
		s       *mcpSession
		method  string
		params  map[string]any
		code    int
		message string
	}{
		{"a task call of an unknown tool", s, "tools/call", map[string]any{"name": "secret", "arguments": map[string]any{"prompt": "hi"},
			"task": map[string]any{}}, -32602, `unknown tool "secret"`},
		{"a task call with bad arguments", s, "tools/call", map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": " "},
			"task": map[string]any{}}, -32602, "arguments.prompt is required"},
		{"a task that is no object", s, "tools/call", map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": "hi"},
			"task": 7}, -32602, "params.task: want an object"},
		{"a ttl below 0", s, "tools/call", map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": "hi"},
			"task": map[string]any{"ttl": -5}}, -32602, "params.task.ttl"},
		{"an unknown task", s, "tasks/get", map[string]any{"taskId": "turn/demo/no-such-job"}, -32602, `task "turn/demo/no-such-job" not found`},
		{"no task id", s, "tasks/get", map[string]any{}, -32602, "params.taskId is required"},
		{"a task id that is no string", s, "tasks/get", map[string]any{"taskId": 7}, -32602, ""},
		{"another caller's task", bo, "tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "not found"},
		{"cancel: another caller's task", bo, "tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "not found"},
		{"another tenant's task", other, "tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "not found"},
		{"result: another tenant's task", other, "tasks/result", map[string]any{"taskId": task.TaskID}, -32602, "not found"},
		{"cancel: another tenant's task", other, "tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "not found"},
		{"result: an unknown task", s, "tasks/result", map[string]any{"taskId": "turn/demo/mcp-task-x"}, -32602, "not found"},
		{"a cursor that is not base64", s, "tasks/list", map[string]any{"cursor": "%%%"}, -32602, "Invalid cursor"},
		{"a cursor no listing gave", s, "tasks/list", map[string]any{"cursor": "bm90IGEgdG9rZW4"}, -32602, "Invalid cursor"},
		{"tasks in a 2025-06-18 session", old, "tasks/get", map[string]any{"taskId": task.TaskID}, -32601, "method not found"},
		{"tasks/list in a 2025-06-18 session", old, "tasks/list", map[string]any{}, -32601, "method not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.s.call(tc.method, tc.params)
			require.NotNil(t, a.Error, "%s", a.Result)
			require.Equal(t, tc.code, a.Error.Code, a.Error.Message)
			require.Contains(t, a.Error.Message, tc.message)
		})
	}

	// An older session's task-augmented call is a call, as the spec asks
	// of a server that declared no tasks to it.
	a = old.call("tools/call", map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": "What is 2 * 4?"},
		"task": map[string]any{"ttl": 60000}})
	require.Nil(t, a.Error)
	require.Contains(t, string(a.Result), "The result is 8.")
	require.NotContains(t, string(a.Result), `"task"`)
	a = old.call("initialize", map[string]any{})
	require.NotContains(t, string(a.Result), `"tasks"`)

	// None of it touched the task: it ends as it would have, read by
	// tasks/get, answered by tasks/result, listed by tasks/list.
	require.Eventually(t, func() bool {
		a := s.call("tasks/get", map[string]any{"taskId": task.TaskID})
		require.Nil(t, a.Error)
		var got sessionTask
		require.NoError(t, json.Unmarshal(a.Result, &got))
		require.Equal(t, task.CreatedAt, got.CreatedAt)
		if got.Status != "completed" {
			require.Equal(t, "working", got.Status)
			return false
		}
		require.Zero(t, got.PollInterval)
		return true
	}, time.Minute, 100*time.Millisecond)
	a = s.call("tasks/result", map[string]any{"taskId": task.TaskID})
	require.Nil(t, a.Error)
	var res struct {
		Content []struct{ Text string }
		IsError bool
		Meta    map[string]json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(a.Result, &res))
	require.False(t, res.IsError)
	require.Equal(t, "The result is 42.", res.Content[0].Text)
	require.JSONEq(t, `{"taskId":"`+task.TaskID+`"}`, string(res.Meta["io.modelcontextprotocol/related-task"]))
	a = s.call("tasks/cancel", map[string]any{"taskId": task.TaskID})
	require.NotNil(t, a.Error, "an ended task is not cancelled")
	require.Equal(t, -32602, a.Error.Code)
	require.Contains(t, a.Error.Message, "already in terminal status 'completed'")
	require.Eventually(t, func() bool {
		a := s.call("tasks/list", map[string]any{})
		require.Nil(t, a.Error)
		var page struct{ Tasks []sessionTask }
		require.NoError(t, json.Unmarshal(a.Result, &page))
		return len(page.Tasks) == 1 && page.Tasks[0].TaskID == task.TaskID && page.Tasks[0].Status == "completed"
	}, time.Minute, 100*time.Millisecond)
	for _, c := range []*mcpSession{other, bo} {
		a = c.call("tasks/list", map[string]any{})
		require.Nil(t, a.Error)
		require.JSONEq(t, `{"tasks":[]}`, string(a.Result), "another caller has none")
	}
}
