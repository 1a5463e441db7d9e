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

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/testserver"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// mcpTasksScript answers arithmetic with the calculator.
const mcpTasksScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

// mcpTasksCatalog exposes an agent of each of two tenants through MCP.
var mcpTasksCatalog = []string{`
tenant: demo
default_agent: assistant
tools:
  - {name: calculator, kind: calculator}
agents:
  - {id: assistant, model: "openai:gpt-4o-mini", tools: [calculator], expose: [mcp]}
`, `
tenant: other
default_agent: secret
agents:
  - {id: secret, model: "openai:gpt-4o-mini", expose: [mcp]}
`}

// mcpV2 is MCP 2026-07-28's version.
const mcpV2 = "2026-07-28"

// mcpAnswer is a JSON-RPC answer.
type mcpAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// mcpMeta is a 2026-07-28 request's _meta: its version, its client, and
// its capabilities (the Tasks extension when tasks is set).
func mcpMeta(version string, tasks bool) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return map[string]any{"io.modelcontextprotocol/protocolVersion": version,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "agentflow-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps}
}

// mcpCall sends one JSON-RPC request of protocol version (header and
// _meta) to the MCP endpoint with token, and reads its answer, as JSON or
// as the one message of an event stream.
func mcpCall(t *testing.T, api, token, version, method string, params map[string]any) mcpAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, api+mcpdoor.MCPPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	req.Header.Set("Mcp-Method", method)
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
				raw = []byte(data)
			}
		}
	}
	var a mcpAnswer
	require.NoError(t, json.Unmarshal(raw, &a), "HTTP %d: %s", resp.StatusCode, raw)
	return a
}

// TestMCPTaskErrors: bad input on every Tasks method — a task that does
// not exist or is another tenant's, a client that did not declare the
// extension, a protocol version the server does not speak, malformed
// params, the removed tasks/result — gets MCP's own JSON-RPC error, and
// changes nothing: the task goes on and ends as it would have.
func TestMCPTaskErrors(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{
		Script: mcpTasksScript, Catalogs: mcpTasksCatalog, HTTPAPI: true,
		Tokens: map[string]string{"tok-demo": "demo:user+approver:ana", "tok-other": "other:user"},
	})
	api := "http://" + srv.HTTPAPIAddr()

	// A task of demo's, to name.
	created := mcpCall(t, api, "tok-demo", mcpV2, "tools/call", map[string]any{"name": "assistant",
		"arguments": map[string]any{"prompt": "What is 6 * 7?"}, "_meta": mcpMeta(mcpV2, true)})
	require.Nil(t, created.Error)
	var task struct {
		ResultType, TaskID, Status string
	}
	require.NoError(t, json.Unmarshal(created.Result, &task))
	require.Equal(t, "task", task.ResultType)
	require.Equal(t, "working", task.Status)
	require.True(t, strings.HasPrefix(task.TaskID, "turn/demo/"), task.TaskID)

	withTasks, without := mcpMeta(mcpV2, true), mcpMeta(mcpV2, false)
	for _, tc := range []struct {
		name, token, version, method string
		params                       map[string]any
		code                         int
		message                      string
	}{
		{"an unknown task", "tok-demo", mcpV2, "tasks/get", map[string]any{"taskId": "turn/demo/no-such-job", "_meta": withTasks},
			-32602, `task "turn/demo/no-such-job" not found`},
		{"another tenant's task", "tok-other", mcpV2, "tasks/get", map[string]any{"taskId": task.TaskID, "_meta": withTasks},
			-32602, `task "` + task.TaskID + `" not found`},
		{"not a stream id", "tok-demo", mcpV2, "tasks/get", map[string]any{"taskId": "786512e2-9e0d", "_meta": withTasks},
			-32602, "not found"},
		{"no task id", "tok-demo", mcpV2, "tasks/get", map[string]any{"_meta": withTasks}, -32602, "params.taskId is required"},
		{"a task id that is no string", "tok-demo", mcpV2, "tasks/get", map[string]any{"taskId": 7, "_meta": withTasks}, -32602, ""},
		{"the extension not declared", "tok-demo", mcpV2, "tasks/get", map[string]any{"taskId": task.TaskID, "_meta": without},
			-32021, "Missing required client capability"},
		{"update: the extension not declared", "tok-demo", mcpV2, "tasks/update",
			map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{}, "_meta": without}, -32021, "io.modelcontextprotocol/tasks"},
		{"update: another tenant's task", "tok-other", mcpV2, "tasks/update",
			map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{}, "_meta": withTasks}, -32602, "not found"},
		{"update: a response that is none", "tok-demo", mcpV2, "tasks/update",
			map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{"approval-3": map[string]any{"x": 1}}, "_meta": withTasks},
			-32602, "cannot determine InputResponse type"},
		{"cancel: an unknown task", "tok-demo", mcpV2, "tasks/cancel", map[string]any{"taskId": "turn/demo/no-such-job", "_meta": withTasks},
			-32602, "not found"},
		{"cancel: another tenant's task", "tok-other", mcpV2, "tasks/cancel", map[string]any{"taskId": task.TaskID, "_meta": withTasks},
			-32602, "not found"},
		{"tasks/result is 2025-11-25's", "tok-demo", mcpV2, "tasks/result", map[string]any{"taskId": task.TaskID, "_meta": withTasks},
			-32601, ""},
		{"a version the server does not speak", "tok-demo", "2099-01-01", "tasks/get",
			map[string]any{"taskId": task.TaskID, "_meta": mcpMeta("2099-01-01", true)}, -32022, "unsupported protocol version"},
		{"a header that is not the request's version", "tok-demo", mcpV2, "tasks/get",
			map[string]any{"taskId": task.TaskID, "_meta": mcpMeta("2026-08-01", true)}, -32020, "does not match"},
		{"a task call of an unknown tool", "tok-demo", mcpV2, "tools/call",
			map[string]any{"name": "secret", "arguments": map[string]any{"prompt": "hi"}, "_meta": withTasks}, -32602, `unknown tool "secret"`},
		{"a task call with bad arguments", "tok-demo", mcpV2, "tools/call",
			map[string]any{"name": "assistant", "arguments": map[string]any{"prompt": ""}, "_meta": withTasks}, -32602, "arguments.prompt is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mcpCall(t, api, tc.token, tc.version, tc.method, tc.params)
			require.NotNil(t, a.Error, "%s", a.Result)
			require.Equal(t, tc.code, a.Error.Code, a.Error.Message)
			require.Contains(t, a.Error.Message, tc.message)
			if tc.code == -32021 {
				require.JSONEq(t, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, string(a.Error.Data))
			}
		})
	}

	// None of it touched the task: it ends as it would have.
	require.Eventually(t, func() bool {
		a := mcpCall(t, api, "tok-demo", mcpV2, "tasks/get", map[string]any{"taskId": task.TaskID, "_meta": withTasks})
		require.Nil(t, a.Error)
		var got struct {
			ResultType, Status string
			Result             struct {
				Content []struct{ Text string }
				IsError bool
			}
		}
		require.NoError(t, json.Unmarshal(a.Result, &got))
		require.Equal(t, "complete", got.ResultType)
		if got.Status != "completed" {
			require.Equal(t, "working", got.Status)
			return false
		}
		require.False(t, got.Result.IsError)
		require.Equal(t, "The result is 42.", got.Result.Content[0].Text)
		return true
	}, time.Minute, 100*time.Millisecond)

	// A 2025-11-25 client has not the extension: its initialize declares
	// that version's tasks (mcp_session_tasks_test.go).
	a := mcpCall(t, api, "tok-demo", "2025-11-25", "initialize", map[string]any{"protocolVersion": "2025-11-25",
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "agentflow-test", "version": "1"}})
	require.Nil(t, a.Error)
	require.NotContains(t, string(a.Result), "io.modelcontextprotocol/tasks")
	require.Contains(t, string(a.Result), `"protocolVersion":"2025-11-25"`)
	require.Contains(t, string(a.Result), `"tasks":{`)
}
