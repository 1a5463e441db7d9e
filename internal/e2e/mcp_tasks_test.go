package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// mcpTasksScript is httpScript with a question: "book a trip" asks which
// city.
var mcpTasksScript = strings.Replace(httpScript, "  - name: answer\n", `  - name: trip
    when: {user: '(?i)^book a trip'}
    reply: {tool_calls: [{name: ask_user, arguments: '{"question": "Which city?", "choices": ["Paris", "Rome"]}'}]}
  - name: answer
`, 1)

// mcpTasksCatalog exposes an agent with a tool, one whose tool needs
// approval and one that asks, through MCP.
const mcpTasksCatalog = `
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
  - name: careful_calculator
    kind: calculator
    approval: always
  - name: ask_user
    kind: ask_user
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    expose: [mcp]
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    expose: [mcp]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
  - id: planner
    model: openai:gpt-4o-mini
    tools: [ask_user]
    expose: [mcp]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`

// mcpV2 is MCP 2026-07-28's version.
const mcpV2 = "2026-07-28"

// tasksEnv is one deployment with two gateways: a task started on one is
// read, answered and cancelled on the other.
type tasksEnv struct {
	*httpEnv
	other string // the second gateway's HTTP API
}

func newTasksEnv(t *testing.T) *tasksEnv {
	t.Helper()
	var opts testserver.Options
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs, o.DatabaseURL = mcpTasksScript, []string{mcpTasksCatalog, httpCatalogs[1]}, devtest.Database(t)
		opts = *o
	})
	opts.Script, opts.Catalogs, opts.SharedModel, opts.TaskQueue = "", nil, e.Model, e.TaskQueue
	second := testserver.Start(t, opts) // the same deployment: database, Temporal, task queue
	return &tasksEnv{httpEnv: e, other: "http://" + second.HTTPAPIAddr()}
}

// rpcAnswer is a JSON-RPC answer.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// mcpTask is a task as tasks/get and tools/call carry it.
type mcpTask struct {
	ResultType    string `json:"resultType"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTLMs         *int64 `json:"ttlMs"`
	PollIntervalM int64  `json:"pollIntervalMs"`
	InputRequests map[string]struct {
		Method string `json:"method"`
		Params struct {
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	} `json:"inputRequests"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	} `json:"result"`
}

// rpc sends a JSON-RPC request of MCP 2026-07-28, from a client that
// declares the Tasks extension and elicitation (unless params has a
// _meta of its own), to the MCP endpoint of api, as the protocol's HTTP
// transport sends it (its headers: version, method, name).
func (e *tasksEnv) rpc(api, token, method string, params map[string]any) rpcAnswer {
	e.t.Helper()
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = tasksMeta(true)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(e.t, err)
	req, err := http.NewRequest(http.MethodPost, api+mcpdoor.MCPPath, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpV2)
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"taskId", "name"} {
		if v, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
				raw = []byte(data)
			}
		}
	}
	var a rpcAnswer
	require.NoError(e.t, json.Unmarshal(raw, &a), "HTTP %d: %s", resp.StatusCode, raw)
	return a
}

// tasksMeta is the _meta of a 2026-07-28 request of a client that declares
// Tasks, and elicitation when elicits.
func tasksMeta(elicits bool) map[string]any {
	caps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	if elicits {
		caps["elicitation"] = map[string]any{}
	}
	return map[string]any{"io.modelcontextprotocol/protocolVersion": mcpV2,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "agentflow-e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps}
}

// task decodes a task from an answer that must be one.
func (e *tasksEnv) task(a rpcAnswer) mcpTask {
	e.t.Helper()
	require.Nil(e.t, a.Error, "%+v", a.Error)
	var t mcpTask
	require.NoError(e.t, json.Unmarshal(a.Result, &t), "%s", a.Result)
	return t
}

// start calls agent with prompt as a task, on api.
func (e *tasksEnv) start(api, token, agentID, prompt string) mcpTask {
	e.t.Helper()
	t := e.task(e.rpc(api, token, "tools/call", map[string]any{"name": agentID, "arguments": map[string]any{"prompt": prompt}}))
	require.Equal(e.t, "task", t.ResultType)
	require.Equal(e.t, "working", t.Status)
	require.True(e.t, strings.HasPrefix(t.TaskID, "turn/demo/"), "the task id is the turn's stream id: %s", t.TaskID)
	return t
}

// poll reads a task on api until its status is want.
func (e *tasksEnv) poll(api, token, taskID, want string) mcpTask {
	e.t.Helper()
	var t mcpTask
	require.Eventually(e.t, func() bool {
		t = e.task(e.rpc(api, token, "tasks/get", map[string]any{"taskId": taskID}))
		require.Equal(e.t, "complete", t.ResultType)
		return t.Status == want
	}, time.Minute, 100*time.Millisecond, "task %s: %s, want %s", taskID, t.Status, want)
	return t
}

// requireAck checks an empty acknowledgement (its _meta aside).
func requireAck(t *testing.T, a rpcAnswer) {
	t.Helper()
	require.Nil(t, a.Error, "%+v", a.Error)
	var ack map[string]any
	require.NoError(t, json.Unmarshal(a.Result, &ack))
	delete(ack, "_meta")
	require.Equal(t, map[string]any{"resultType": "complete"}, ack)
}

// TestMCPTask: a tools/call of a 2026-07-28 client that declares Tasks
// is answered at once with a task, the turn; any gateway answers
// tasks/get for it, and the completed task's result text is the stored
// result's.
func TestMCPTask(t *testing.T) {
	e := newTasksEnv(t)
	task := e.start(e.api, e.all, "assistant", "What is 6 * 7?")
	require.NotEmpty(t, task.CreatedAt)
	require.Nil(t, task.TTLMs, "kept as long as its turn")
	require.Equal(t, int64(1000), task.PollIntervalM)

	done := e.poll(e.other, e.all, task.TaskID, "completed")
	require.Equal(t, task.CreatedAt, done.CreatedAt)
	require.GreaterOrEqual(t, done.LastUpdatedAt, done.CreatedAt)
	require.Empty(t, done.PollIntervalM, "nothing more to poll for")
	require.NotNil(t, done.Result)
	require.False(t, done.Result.IsError)
	require.Len(t, done.Result.Content, 1)
	stored, err := e.Store().Result(context.Background(), "demo", strings.TrimPrefix(task.TaskID, "turn/demo/"))
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", stored.Output)
	require.Equal(t, stored.Output, done.Result.Content[0].Text, "the task's result is the stored result")
	require.Equal(t, task.TaskID, done.Result.Meta["agentflow/stream_id"])

	// The same turn, by the same id, on another door.
	require.Equal(t, stored.Output, e.turnResult(task.TaskID).Output)
	require.NotEmpty(t, e.events(task.TaskID, e.user))
}

// TestMCPTaskInput: a task whose turn waits is input_required, with an
// elicitation per thing the caller may decide; tasks/update decides an
// approval or answers a question as the caller. A caller who may not
// approve, or whose client cannot be asked, sees the task working,
// waiting for a person, and an approval over another door (the API, by
// the same id) decides it too. Another caller does not see the task.
func TestMCPTaskInput(t *testing.T) {
	e := newTasksEnv(t)

	t.Run("an approval, decided by tasks/update on another gateway", func(t *testing.T) {
		task := e.start(e.api, e.all, "careful", "carefully, what is 2 * 3?")
		waiting := e.poll(e.other, e.all, task.TaskID, "input_required")
		require.Len(t, waiting.InputRequests, 1)
		var key string
		for k, r := range waiting.InputRequests {
			key = k
			require.Equal(t, "elicitation/create", r.Method)
			require.Contains(t, r.Params.Message, "careful_calculator")
			require.Contains(t, string(r.Params.RequestedSchema), `"approved"`)
		}
		require.True(t, strings.HasPrefix(key, "approval-"), key)
		// Another caller of the tenant does not see it: a task is its
		// creator's.
		other := e.rpc(e.api, e.user, "tasks/get", map[string]any{"taskId": task.TaskID})
		require.NotNil(t, other.Error)
		require.Equal(t, -32602, other.Error.Code, other.Error.Message)
		// A client that cannot be asked (no elicitation) is asked nothing.
		unasked := e.task(e.rpc(e.api, e.all, "tasks/get", map[string]any{"taskId": task.TaskID, "_meta": tasksMeta(false)}))
		require.Equal(t, "working", unasked.Status)
		require.Empty(t, unasked.InputRequests)

		ack := e.rpc(e.other, e.all, "tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{
			key:            map[string]any{"action": "accept", "content": map[string]any{"approved": true, "reason": "fine"}},
			"approval-999": map[string]any{"action": "accept", "content": map[string]any{"approved": false}}, // not outstanding: ignored
		}})
		requireAck(t, ack)
		done := e.poll(e.api, e.all, task.TaskID, "completed")
		require.Equal(t, "The result is 6.", done.Result.Content[0].Text)
		recs, err := e.Store().Approvals(context.Background(), "demo", strings.TrimPrefix(task.TaskID, "turn/demo/"))
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, "al", recs[0].Approver, "the token's holder decided")
	})

	t.Run("an approval, decided over the API", func(t *testing.T) {
		task := e.start(e.api, e.user, "careful", "carefully, what is 3 * 3?")
		p := e.waitPending(task.TaskID)
		// Its creator may not approve: it sees it waiting for someone else.
		waiting := e.task(e.rpc(e.api, e.user, "tasks/get", map[string]any{"taskId": task.TaskID}))
		require.Equal(t, "working", waiting.Status)
		require.Empty(t, waiting.InputRequests)
		require.Contains(t, waiting.StatusMessage, "waiting for a person to approve")
		var ack pb.ApproveResponse
		e.ok("POST", "/v1/"+task.TaskID+"/approvals/"+p.GetCallId(), e.approver,
			`{"approval_id": "`+p.GetApprovalId()+`", "approved": true}`, &ack)
		done := e.poll(e.other, e.user, task.TaskID, "completed")
		require.Equal(t, "The result is 9.", done.Result.Content[0].Text)
	})

	t.Run("a question, answered by tasks/update", func(t *testing.T) {
		task := e.start(e.other, e.user, "planner", "Book a trip")
		waiting := e.poll(e.api, e.user, task.TaskID, "input_required")
		require.Len(t, waiting.InputRequests, 1)
		for key, r := range waiting.InputRequests {
			require.True(t, strings.HasPrefix(key, "question-"), key)
			require.Equal(t, "Which city?", r.Params.Message)
			require.Contains(t, string(r.Params.RequestedSchema), `"enum":["Paris","Rome"]`)
			ack := e.rpc(e.api, e.user, "tasks/update", map[string]any{"taskId": task.TaskID,
				"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": "Rome"}}}})
			require.Nil(t, ack.Error)
		}
		done := e.poll(e.other, e.user, task.TaskID, "completed")
		require.Equal(t, "The result is Rome.", done.Result.Content[0].Text)
	})

	t.Run("an answer that is none of the choices", func(t *testing.T) {
		task := e.start(e.api, e.user, "planner", "Book a trip")
		waiting := e.poll(e.api, e.user, task.TaskID, "input_required")
		for key := range waiting.InputRequests {
			a := e.rpc(e.api, e.user, "tasks/update", map[string]any{"taskId": task.TaskID,
				"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": "Oslo"}}}})
			require.NotNil(t, a.Error)
			require.Equal(t, -32602, a.Error.Code, a.Error.Message)
		}
		e.poll(e.api, e.user, task.TaskID, "input_required") // still asked
		require.Nil(t, e.rpc(e.api, e.user, "tasks/cancel", map[string]any{"taskId": task.TaskID}).Error)
	})
}

// TestMCPTaskCancel: tasks/cancel, on another gateway than the one that
// started the task, cancels its turn; cancelling an ended task is
// acknowledged too.
func TestMCPTaskCancel(t *testing.T) {
	e := newTasksEnv(t)
	task := e.start(e.api, e.all, "careful", "carefully, what is 5 * 5?")
	e.poll(e.api, e.all, task.TaskID, "input_required")
	ack := e.rpc(e.other, e.all, "tasks/cancel", map[string]any{"taskId": task.TaskID})
	requireAck(t, ack)
	cancelled := e.poll(e.api, e.all, task.TaskID, "cancelled")
	require.Contains(t, cancelled.StatusMessage, "the MCP client cancelled the task")
	require.Nil(t, cancelled.Result)
	events := e.events(task.TaskID, e.user) // the turn, by the same id, over the API
	require.Equal(t, pb.Status_STATUS_CANCELED, events[len(events)-1].GetStatus().GetStatus())
	require.Nil(t, e.rpc(e.api, e.all, "tasks/cancel", map[string]any{"taskId": task.TaskID}).Error, "once more: acknowledged")
}

// TestMCPInputRequired: a 2026-07-28 client without Tasks (the MCP Go
// SDK's, as it connects by default) calls an agent whose tool needs
// approval: the call answers input_required with the approval, the
// client's elicitation handler decides it, and the call sent again with
// the decision ends with the turn's answer.
func TestMCPInputRequired(t *testing.T) {
	e := newTasksEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	asked := make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-e2e", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, nil
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.other + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: mcpBearer{token: e.all, base: http.DefaultTransport}},
	}, nil)
	require.NoError(t, err)
	defer session.Close()
	require.Equal(t, mcpV2, session.InitializeResult().ProtocolVersion)
	require.Empty(t, session.ID(), "no session")
	tools, err := session.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 3)

	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "careful", Arguments: map[string]any{"prompt": "carefully, what is 4 * 4?"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "The result is 16.", res.Content[0].(*mcp.TextContent).Text)
	require.Contains(t, <-asked, "careful_calculator")
	stream, _ := res.Meta["agentflow/stream_id"].(string)
	recs, err := e.Store().Approvals(ctx, "demo", strings.TrimPrefix(stream, "turn/demo/"))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "al", recs[0].Approver)
}
