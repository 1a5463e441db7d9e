package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// MCP 2025-11-25's tasks (basic/utilities/tasks, experimental in that
// version), for the clients of sessions: the TypeScript SDK's
// client.experimental.tasks and every client built on it. A session of
// 2025-11-25 declares the tasks capability (tasks/list, tasks/cancel,
// task-augmented tools/call) and each tool's execution.taskSupport
// "optional". A tools/call with params.task is answered at once with a
// CreateTaskResult: the turn, started and durable, whose task id is its
// stream id, as a 2026-07-28 task's is (mcp_tasks.go) — one turn behind
// both versions, read from its log by any gateway (mcp_task.go). Then:
//
//	tasks/get     the task now: working, input_required (the caller may
//	              give what the turn waits for, and its client can be
//	              asked), completed, failed (the turn did not complete:
//	              its result is isError) or cancelled
//	tasks/result  blocks until the turn ends and answers what tools/call
//	              would have, with the related-task _meta; meanwhile it
//	              asks the client (elicitation/create, on its own stream,
//	              with the related-task _meta) for each approval and
//	              question the caller may give, and gives the turn the
//	              answers (settle)
//	tasks/cancel  cancels the turn and answers once it has ended;
//	              -32602 for a task that has ended already
//	tasks/list    the caller's tasks, the most recently active first, a
//	              page at a time (nextCursor)
//
// A task is its creator's (ownsTask). The server sends no
// notifications/tasks/status (optional: clients poll, as the spec asks
// them to); the Go SDK's server has no way to send a notification of a
// method of its own.

// The 2025-11-25 tasks' names and bounds.
const (
	// mcpSessionTasksVersion is the first protocol version whose sessions
	// have tasks; mcpTasksVersion, which has the extension instead, is
	// the last's successor.
	mcpSessionTasksVersion = "2025-11-25"
	mcpMethodTaskResult    = "tasks/result"
	mcpMethodListTasks     = "tasks/list"
	// mcpRelatedTaskMeta names, in a message's _meta, the task it is of.
	mcpRelatedTaskMeta = "io.modelcontextprotocol/related-task"
	// mcpImmediateResponseMeta is what a host may give its model at once
	// when a tools/call it made is a task (CreateTaskResult's _meta).
	mcpImmediateResponseMeta = "io.modelcontextprotocol/model-immediate-response"
	// mcpTaskHeader carries a tools/call's params.task from the front
	// handler (which reads the body) to the middleware (whose typed
	// params have no such field), as mcpJobHeader carries its job id.
	mcpTaskHeader = "X-Agentflow-Mcp-Task"
	// mcpTaskListPage is how many tasks a tasks/list page holds.
	mcpTaskListPage = 20
	// mcpCancelWait bounds how long tasks/cancel waits for the turn to
	// end; a turn stops at its next safe point, at once when it waits.
	mcpCancelWait = 30 * time.Second
)

// sessionTasks reports whether a session speaks 2025-11-25's tasks.
func sessionTasks(session *mcp.ServerSession) bool {
	p := session.InitializeParams()
	return p != nil && p.ProtocolVersion >= mcpSessionTasksVersion && p.ProtocolVersion < mcpTasksVersion
}

// mcpSessionTask is a task as 2025-11-25 carries it (Task).
type mcpSessionTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	mcpTaskTimes
	// TTL is null: a task lasts as long as its turn is kept (the
	// Temporal namespace's retention after it ends); a requested ttl is
	// overridden, as the spec allows.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// mcpTaskResult is tasks/get's and tasks/cancel's result: the task.
type mcpTaskResult struct {
	mcp.ResultBase
	mcpSessionTask
}

// mcpCreateTaskResult is a task-augmented tools/call's result.
type mcpCreateTaskResult struct {
	mcp.ResultBase
	Task mcpSessionTask `json:"task"`
}

// mcpListTasksParams are tasks/list's params.
type mcpListTasksParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// mcpListTasksResult is tasks/list's result.
type mcpListTasksResult struct {
	mcp.ResultBase
	Tasks      []mcpSessionTask `json:"tasks"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// sessionTask is the task as caller sees it, from a client that can be
// asked (elicits) or not: 2025-11-25's statuses, where a turn that did
// not complete, and was not cancelled, failed.
func (t *mcpTask) sessionTask(caller gateway.Token, times mcpTaskTimes, elicits bool) mcpSessionTask {
	status, msg := t.status(caller, elicits)
	if t.end != nil && t.end.Status != agent.StreamCompleted && t.end.Status != agent.StreamCanceled {
		status, msg = mcpTaskFailed, t.ended()
	}
	s := mcpSessionTask{TaskID: t.id, Status: status, StatusMessage: msg, mcpTaskTimes: times}
	if t.end == nil {
		s.PollInterval = mcpTaskPollMs
	}
	return s
}

// mcpTaskRequest is a tools/call's params.task (TaskMetadata).
type mcpTaskRequest struct {
	// TTL is the lifetime the client asks for, in milliseconds.
	TTL *float64 `json:"ttl,omitempty"`
}

// decodeMCPTaskRequest reads a tools/call's params.task: an object
// whose ttl, if any, is a number of milliseconds, 0 or more. Members
// of later versions are let be, as a client's other fields are.
func decodeMCPTaskRequest(raw []byte) (mcpTaskRequest, error) {
	var r mcpTaskRequest
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return r, errors.New(`params.task: want an object, {"ttl": <milliseconds>}`)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf(`params.task: want {"ttl": <milliseconds>}: %v`, err)
	}
	if r.TTL != nil && (*r.TTL < 0 || math.IsInf(*r.TTL, 0) || math.IsNaN(*r.TTL)) {
		return r, fmt.Errorf("params.task.ttl: %v milliseconds: want 0 or more", *r.TTL)
	}
	return r, nil
}

// addSessionTasks adds 2025-11-25's tasks to a session's server; agents
// are the server's tools, by id.
func (m *mcpServer) addSessionTasks(srv *mcp.Server, agents map[string]bool) {
	srv.AddReceivingMiddleware(m.sessionTaskMiddleware(agents))
	// The methods' names are not the SDK's own: these never fail.
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodGetTask, m.getSessionTask)
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodTaskResult, m.sessionTaskResult)
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodCancelTask, m.cancelSessionTask)
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodListTasks, m.listSessionTasks)
}

// sessionTaskMiddleware, for a session of 2025-11-25: declares the tasks
// capability in initialize's result and each tool's task support in
// tools/list's, and answers a tools/call with params.task with a task.
// Older sessions have no tasks, and a task in their calls is ignored, as
// the spec asks of a server that did not declare them.
func (m *mcpServer) sessionTaskMiddleware(agents map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			session, _ := req.GetSession().(*mcp.ServerSession)
			if call, ok := req.(*mcp.CallToolRequest); ok && call.Extra != nil && call.Params != nil {
				if raw := call.Extra.Header.Get(mcpTaskHeader); raw != "" && sessionTasks(session) {
					return m.callAsSessionTask(ctx, call, agents, raw)
				}
			}
			res, err := next(ctx, method, req)
			if err != nil || session == nil || !sessionTasks(session) {
				return res, err
			}
			switch r := res.(type) {
			case *mcp.InitializeResult:
				return &mcpInitializeResult{r}, nil
			case *mcp.ListToolsResult:
				return &mcpToolsResult{r}, nil
			}
			return res, nil
		}
	}
}

// callAsSessionTask starts the turn of a tools/call with params.task raw
// and answers with its task. What fails before the turn exists is a
// JSON-RPC error: the client waits for a task, not a tool's result.
func (m *mcpServer) callAsSessionTask(ctx context.Context, req *mcp.CallToolRequest, agents map[string]bool, raw string) (mcp.Result, error) {
	if _, err := decodeMCPTaskRequest([]byte(raw)); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if !agents[req.Params.Name] {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", req.Params.Name)}
	}
	streamID, times, err := m.startTask(ctx, req)
	if err != nil {
		return nil, m.startError(ctx, err)
	}
	s := newMCPTask(streamID, nil).sessionTask(gateway.CallerOf(ctx), times, false)
	s.StatusMessage = "the turn has started"
	return &mcpCreateTaskResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{mcpImmediateResponseMeta: fmt.Sprintf(
		"The agent %s is working on it, as task %s: its answer comes with tasks/result.", req.Params.Name, streamID)}}, Task: s}, nil
}

// startError is the JSON-RPC error of a task that could not start: the
// caller's fault (a 4xx of the HTTP API's but a limit's 429) is invalid
// params, the rest internal errors; each says no more than other doors
// do.
func (m *mcpServer) startError(ctx context.Context, err error) *jsonrpc.Error {
	if jerr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return jerr
	}
	var code int64 = jsonrpc.CodeInternalError
	if c := agent.ErrorCode(err).Class().HTTP; c >= 400 && c < 500 && c != http.StatusTooManyRequests {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: m.s.ClientMessage(ctx, err)}
}

// sessionTasksOnly refuses a task method to a session that has no tasks:
// -32601, as a method the server does not have (the SDK words it).
func sessionTasksOnly(session *mcp.ServerSession) error {
	if sessionTasks(session) {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks are MCP " + mcpSessionTasksVersion + "'s"}
}

// getSessionTask answers tasks/get.
func (m *mcpServer) getSessionTask(ctx context.Context, session *mcp.ServerSession, p *mcpTaskParams) (*mcpTaskResult, error) {
	t, times, err := m.taskOf(ctx, sessionTasksOnly(session), taskIDOf(p))
	if err != nil {
		return nil, err
	}
	return &mcpTaskResult{mcpSessionTask: t.sessionTask(gateway.CallerOf(ctx), times, elicits(session))}, nil
}

// taskIDOf is the task id params name; "" for none.
func taskIDOf(p *mcpTaskParams) string {
	if p == nil {
		return ""
	}
	return p.TaskID
}

// sessionTaskResult answers tasks/result: the turn's result once it has
// ended, as tools/call answers it, with the related-task _meta. Until
// then it asks the client for the inputs the turn waits for that the
// caller may give, on this request's stream, and follows the turn.
func (m *mcpServer) sessionTaskResult(ctx context.Context, session *mcp.ServerSession, p *mcpTaskParams) (*mcp.CallToolResult, error) {
	t, _, err := m.taskOf(ctx, sessionTasksOnly(session), taskIDOf(p))
	if err != nil {
		return nil, err
	}
	related := mcp.Meta{mcpRelatedTaskMeta: map[string]any{"taskId": t.id}}
	if t.end == nil {
		if err := m.awaitTask(ctx, session, t, related); err != nil {
			return nil, err
		}
	}
	res := t.result()
	res.Meta[mcpRelatedTaskMeta] = related[mcpRelatedTaskMeta]
	return res, nil
}

// awaitTask follows task t's turn to its end, asking the client, when it
// can be asked, for what the turn waits for and the caller may give:
// what it waits for now, and what it comes to wait for; each request
// carries related, the task's _meta.
func (m *mcpServer) awaitTask(ctx context.Context, session *mcp.ServerSession, t *mcpTask, related mcp.Meta) error {
	ctx, release, err := m.s.HoldStream(ctx)
	if err != nil {
		return m.taskError(ctx, t.id, err)
	}
	defer release()
	w := mcpWording{elicits: elicits(session), caller: gateway.CallerOf(ctx)}
	// The asks end with the request: an answer that comes after it is
	// given by another person, or another tasks/result.
	actx, stop := context.WithCancel(ctx)
	var asks sync.WaitGroup
	defer asks.Wait()
	defer stop()
	ask := func(it projection.Item) {
		if w.asked(it) {
			asks.Go(func() { m.ask(actx, session, t.id, it, related) })
		}
	}
	for _, it := range t.waiting {
		ask(it)
	}
	err = m.s.Events().Follow(ctx, t.id, t.last, func(e agent.Event) error {
		for _, it := range t.apply(e) {
			if it.Kind == projection.InputRequired {
				ask(it)
			}
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return m.taskError(ctx, t.id, err)
	}
	return nil
}

// cancelSessionTask answers tasks/cancel: the turn is asked to stop, as
// every door's cancel asks it, and the answer is the task once the turn
// has ended (cancelled, unless it ended otherwise first), or, if it has
// not within mcpCancelWait, as it is then. A task that has ended is
// -32602, as the spec asks.
func (m *mcpServer) cancelSessionTask(ctx context.Context, session *mcp.ServerSession, p *mcpTaskParams) (*mcpTaskResult, error) {
	t, _, err := m.taskOf(ctx, sessionTasksOnly(session), taskIDOf(p))
	if err != nil {
		return nil, err
	}
	caller := gateway.CallerOf(ctx)
	if t.end != nil {
		return nil, errTaskEnded(t.sessionTask(caller, mcpTaskTimes{}, false).Status)
	}
	// A turn that ended since it was read is a Conflict: the wait below
	// reads its end.
	if err := m.cancel(ctx, t.id, "the MCP client cancelled the task"); err != nil && !agent.IsCode(err, agent.CodeConflict) {
		return nil, m.taskError(ctx, t.id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, mcpCancelWait)
	defer cancel()
	// Until its end, or the wait's; either way the answer says where it is.
	_ = m.s.Events().Follow(wctx, t.id, t.last, func(e agent.Event) error { t.apply(e); return nil })
	times, err := m.taskTimes(ctx, t.id)
	if err != nil {
		return nil, m.taskError(ctx, t.id, err)
	}
	return &mcpTaskResult{mcpSessionTask: t.sessionTask(caller, times, elicits(session))}, nil
}

// errTaskEnded is tasks/cancel's error for a task that has ended.
func errTaskEnded(status string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status)}
}

// listSessionTasks answers tasks/list: a page of the caller's tasks,
// each as tasks/get reads it; nextCursor, when there are more, reads the
// next (mcpCursor).
func (m *mcpServer) listSessionTasks(ctx context.Context, session *mcp.ServerSession, p *mcpListTasksParams) (*mcpListTasksResult, error) {
	if err := sessionTasksOnly(session); err != nil {
		return nil, err
	}
	caller := gateway.CallerOf(ctx)
	prefix := mcpTaskJobPrefix(caller)
	var token []byte
	if p != nil && p.Cursor != "" {
		var ok bool
		if token, ok = parseMCPCursor(prefix, p.Cursor); !ok {
			return nil, errMCPCursor()
		}
	}
	page, err := m.s.ListTurns(ctx, gateway.TurnQuery{JobPrefix: prefix, PageSize: mcpTaskListPage, PageToken: token})
	switch {
	case agent.IsCode(err, agent.CodeInvalid):
		return nil, errMCPCursor()
	case err != nil:
		return nil, m.taskError(ctx, "", err)
	}
	out := &mcpListTasksResult{Tasks: []mcpSessionTask{}}
	for _, id := range page.StreamIDs {
		t, times, err := m.readTask(ctx, id)
		switch {
		case agent.IsCode(err, agent.CodeNotFound):
			continue // gone since it was listed, or no task
		case err != nil:
			return nil, m.taskError(ctx, id, err)
		}
		out.Tasks = append(out.Tasks, t.sessionTask(caller, times, elicits(session)))
	}
	if page.NextPageToken != nil {
		out.NextCursor = mcpCursor(prefix, page.NextPageToken)
	}
	return out, nil
}

// mcpCursorCheck is how many bytes of a cursor check it.
const mcpCursorCheck = 8

// mcpCursor is tasks/list's cursor of the core's page token, for the
// listing of the tasks whose job ids begin with prefix: the token, after
// a check of the two together. A cursor that is not one a listing of the
// caller's gave — mangled, or another caller's — fails the check and is
// refused before the token reaches Temporal (which would take long to
// refuse a token it did not make). The check is no secret: a client
// that forges one gets a token Temporal refuses, and never a listing
// broader than its own.
func mcpCursor(prefix string, token []byte) string {
	sum := sha256.Sum256(append([]byte(prefix), token...))
	return base64.RawURLEncoding.EncodeToString(append(sum[:mcpCursorCheck:mcpCursorCheck], token...))
}

// parseMCPCursor is the page token of a cursor mcpCursor made for
// prefix; false for any other string.
func parseMCPCursor(prefix, cursor string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(raw) <= mcpCursorCheck {
		return nil, false
	}
	token := raw[mcpCursorCheck:]
	sum := sha256.Sum256(append([]byte(prefix), token...))
	return token, bytes.Equal(raw[:mcpCursorCheck], sum[:mcpCursorCheck])
}

// errMCPCursor is tasks/list's error for a cursor it did not give.
func errMCPCursor() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid cursor: send one a tasks/list answer gave, or none"}
}

// What a 2025-11-25 session declares of its tasks, in JSON: the SDK's
// ServerCapabilities and Tool have no field for either.
var (
	// mcpTasksCapability: tasks/list, tasks/cancel and task-augmented
	// tools/call.
	mcpTasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
	// mcpToolExecution: a call of any agent may be a task, or not.
	mcpToolExecution = json.RawMessage(`{"taskSupport":"optional"}`)
)

// mcpInitializeResult is initialize's result with the tasks capability.
type mcpInitializeResult struct{ *mcp.InitializeResult }

// MarshalJSON adds capabilities.tasks.
func (r *mcpInitializeResult) MarshalJSON() ([]byte, error) {
	return marshalWith(r.InitializeResult, func(res map[string]json.RawMessage) error {
		caps := map[string]json.RawMessage{}
		if raw, ok := res["capabilities"]; ok {
			if err := json.Unmarshal(raw, &caps); err != nil {
				return err
			}
		}
		caps["tasks"] = mcpTasksCapability
		var err error
		res["capabilities"], err = json.Marshal(caps)
		return err
	})
}

// mcpToolsResult is tools/list's result with each tool's task support.
type mcpToolsResult struct{ *mcp.ListToolsResult }

// MarshalJSON adds each tool's execution.
func (r *mcpToolsResult) MarshalJSON() ([]byte, error) {
	return marshalWith(r.ListToolsResult, func(res map[string]json.RawMessage) error {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(res["tools"], &tools); err != nil {
			return err
		}
		for _, t := range tools {
			t["execution"] = mcpToolExecution
		}
		var err error
		res["tools"], err = json.Marshal(tools)
		return err
	})
}

// marshalWith is the JSON object v marshals to, with its members as edit
// leaves them.
func marshalWith(v any, edit func(map[string]json.RawMessage) error) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if err := edit(obj); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}
