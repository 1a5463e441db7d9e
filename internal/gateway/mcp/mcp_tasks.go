package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// MCP 2026-07-28 and its Tasks. A request of protocol 2026-07-28 or later
// (its MCP-Protocol-Version header says so) is served statelessly, as
// that version defines: no session, every request carrying its own
// protocol version, client info and capabilities in _meta, and
// server/discover in place of initialize. Older clients keep sessions,
// resumable streams and elicitation (mcp.go, mcp_resume.go).
//
// A stateless server declares the Tasks extension. A tools/call from a
// client that declares it too is answered with a task at once (resultType
// "task"): the turn, started and durable before the answer goes. The
// client polls tasks/get, answers the turn's approvals and ask_user
// questions (input_required) with tasks/update, and cancels it with
// tasks/cancel. A task is read from its turn's log every time (mcp_task.go),
// so any gateway answers for it, and the turn it names can be approved,
// followed or cancelled on every other door by the same id.

// Tasks methods.
const (
	mcpMethodGetTask    = "tasks/get"
	mcpMethodUpdateTask = "tasks/update"
	mcpMethodCancelTask = "tasks/cancel"
)

// mcpTaskParams are the params of the Tasks methods: the task, and for
// tasks/update the responses to its input requests.
type mcpTaskParams struct {
	mcp.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
}

// mcpAck is the empty acknowledgement of tasks/update and tasks/cancel.
type mcpAck struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

func newMCPAck() *mcpAck { return &mcpAck{ResultType: "complete"} }

// addTasks declares the Tasks extension on a stateless server and adds
// its methods; agents are the server's tools, by id.
func (m *mcpServer) addTasks(srv *mcp.Server, agents map[string]bool) {
	srv.AddReceivingMiddleware(m.taskMiddleware(agents))
	// The methods' names are not the SDK's own: these never fail.
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodGetTask, taskMethod(m, m.getTask))
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodUpdateTask, taskMethod(m, m.updateTask))
	_ = mcp.AddReceivingCustomMethod(srv, mcpMethodCancelTask, taskMethod(m, m.cancelTask))
}

// taskMethod is the handler of a Tasks method that does act to the task
// its request names, once the request is checked and the task read
// (taskOf).
func taskMethod[R mcp.Result](m *mcpServer, act func(context.Context, *mcpTaskParams, *mcpTask, mcpTaskTimes) (R, error),
) func(context.Context, *mcp.ServerSession, *mcpTaskParams) (R, error) {
	return func(ctx context.Context, _ *mcp.ServerSession, p *mcpTaskParams) (R, error) {
		if p == nil {
			p = &mcpTaskParams{}
		}
		var refused error
		if !declaresTasks(p.Meta) {
			refused = errMissingTasks()
		}
		t, times, err := m.taskOf(ctx, refused, p.TaskID)
		if err != nil {
			var none R
			return none, err
		}
		return act(ctx, p, t, times)
	}
}

// mcpCapabilities are a stateless server's: the SDK's default (logging),
// tools and resources, which the SDK adds, and the Tasks extension.
func mcpCapabilities() *mcp.ServerCapabilities {
	//lint:ignore SA1019 clients of protocol versions before 2026-07-28 still expect logging
	return &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{},
		Extensions: map[string]any{mcpTasksExtension: map[string]any{}}}
}

// taskMiddleware answers a tools/call with a task when its client
// declares the Tasks extension.
func (m *mcpServer) taskMiddleware(agents map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "prompts/") {
				// The SDK answers prompts/list with none; a server without
				// prompts does not declare them, and has no such method.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this server has no prompts: its tools are agents"}
			}
			if call, isCall := req.(*mcp.CallToolRequest); isCall && call.Params != nil && declaresTasks(call.Params.Meta) {
				if !agents[call.Params.Name] {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", call.Params.Name)}
				}
				return m.callAsTask(ctx, call)
			}
			return next(ctx, method, req)
		}
	}
}

// declaresTasks reports whether a request's _meta declares the Tasks
// extension among its client's capabilities.
func declaresTasks(meta mcp.Meta) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[mcpTasksExtension]
	return ok
}

// declaresElicitation reports whether a request's _meta declares that its
// client can be asked (elicitation): only then are its tasks' input
// requests put to it (a server relies on no capability its client did not
// declare).
func declaresElicitation(meta mcp.Meta) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	_, ok := caps["elicitation"]
	return ok
}

// errMissingTasks is the error of a Tasks method whose client did not
// declare the extension.
func errMissingTasks() *jsonrpc.Error {
	return &jsonrpc.Error{Code: codeMissingClientCapability, Message: "Missing required client capability: " + mcpTasksExtension,
		Data: []byte(`{"requiredCapabilities":{"extensions":{"` + mcpTasksExtension + `":{}}}}`)}
}

// callAsTask starts the turn of a tools/call and answers with its task.
// What fails before the turn exists is the call's result (isError), as a
// call without a task says it.
func (m *mcpServer) callAsTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	streamID, times, err := m.startTask(ctx, req)
	var jerr *jsonrpc.Error
	switch {
	case errors.As(err, &jerr):
		return nil, jerr
	case err != nil:
		return m.toolError(ctx, err), nil
	}
	s := newMCPTask(streamID, nil).state(gateway.CallerOf(ctx), times, "task", false)
	s.StatusMessage = "the turn has started"
	return s, nil
}

// startTask starts the turn of a task-augmented tools/call, of either
// protocol version, under a job id of the caller's (mcpTaskJob), and says
// when it began. Arguments that are not a prompt are a JSON-RPC error;
// the rest of what fails before the turn exists is the core's error.
func (m *mcpServer) startTask(ctx context.Context, req *mcp.CallToolRequest) (string, mcpTaskTimes, error) {
	in, err := decodeMCPInput(req.Params.Arguments)
	if err != nil {
		return "", mcpTaskTimes{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	turn, streamID, err := m.prepare(ctx, req.Params.Name, in.Prompt, mcpTaskJob(gateway.CallerOf(ctx)))
	if err == nil {
		_, err = m.s.StartPrepared(ctx, turn)
	}
	if err != nil {
		return "", mcpTaskTimes{}, err
	}
	// Started: tasks/get finds it from now on, on any gateway.
	times, err := m.taskTimes(ctx, streamID)
	if err != nil {
		now := time.Now().UTC()
		times = mcpTaskTimes{CreatedAt: now, LastUpdatedAt: now}
	}
	return streamID, times, nil
}

// taskOf checks a request of a task method — not refused (the caller may
// use tasks: the Tasks extension declared, or a 2025-11-25 session's), a
// task id — and reads the task.
func (m *mcpServer) taskOf(ctx context.Context, refused error, taskID string) (*mcpTask, mcpTaskTimes, error) {
	if refused != nil {
		return nil, mcpTaskTimes{}, refused
	}
	if taskID == "" {
		return nil, mcpTaskTimes{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId is required"}
	}
	t, times, err := m.readTask(ctx, taskID)
	if err != nil {
		return nil, mcpTaskTimes{}, m.taskError(ctx, taskID, err)
	}
	return t, times, nil
}

// taskError is the JSON-RPC error of a task that could not be read or
// changed: one that does not exist, or is another caller's, is not found
// (invalid params, as the extension says); the rest are internal errors
// that say no more than other doors do.
func (m *mcpServer) taskError(ctx context.Context, taskID string, err error) *jsonrpc.Error {
	var jerr *jsonrpc.Error
	switch {
	case errors.As(err, &jerr):
		return jerr
	case agent.IsCode(err, agent.CodeNotFound), agent.IsCode(err, agent.CodeInvalid):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Failed to retrieve task: task %q not found", taskID)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: m.s.ClientMessage(ctx, err)}
}

// readTask reads a task of the caller's from its turn's log: a turn
// another caller started, or that no MCP task started, is not found.
func (m *mcpServer) readTask(ctx context.Context, taskID string) (*mcpTask, mcpTaskTimes, error) {
	if !ownsTask(gateway.CallerOf(ctx), taskID) {
		return nil, mcpTaskTimes{}, agent.Errorf(agent.CodeNotFound, "task %q not found", taskID)
	}
	events, err := m.turnEvents(ctx, taskID)
	if err != nil {
		return nil, mcpTaskTimes{}, err
	}
	times, err := m.taskTimes(ctx, taskID)
	if err != nil {
		return nil, mcpTaskTimes{}, err
	}
	return newMCPTask(taskID, events), times, nil
}

// taskTimes are when the turn began and when Temporal last shows it
// changing: its end; while it runs, the latest start or heartbeat of its
// pending work, else its run's start. A turn the MCP door did not start
// is no task: not found.
func (m *mcpServer) taskTimes(ctx context.Context, taskID string) (mcpTaskTimes, error) {
	desc, err := m.s.Client().DescribeWorkflowExecution(ctx, taskID, "")
	if err != nil || !startedByMCP(desc.GetWorkflowExecutionInfo()) {
		return mcpTaskTimes{}, agent.Errorf(agent.CodeNotFound, "task %q not found", taskID)
	}
	info := desc.GetWorkflowExecutionInfo()
	// (AsTime is in UTC.)
	t := mcpTaskTimes{CreatedAt: info.GetStartTime().AsTime()}
	t.LastUpdatedAt = t.CreatedAt
	if first := info.GetFirstRunId(); first != "" && first != info.GetExecution().GetRunId() {
		// A turn that continued as new began with its first run.
		if d, err := m.s.Client().DescribeWorkflowExecution(ctx, taskID, first); err == nil {
			t.CreatedAt = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
		}
	}
	later := func(ts *timestamppb.Timestamp) {
		if ts != nil && ts.AsTime().After(t.LastUpdatedAt) {
			t.LastUpdatedAt = ts.AsTime()
		}
	}
	if c := info.GetCloseTime(); c != nil {
		later(c)
		return t, nil
	}
	for _, a := range desc.GetPendingActivities() {
		later(a.GetLastStartedTime())
		later(a.GetLastHeartbeatTime())
	}
	later(desc.GetPendingWorkflowTask().GetScheduledTime())
	return t, nil
}

// getTask answers tasks/get: the task as its turn's log has it now.
func (m *mcpServer) getTask(ctx context.Context, p *mcpTaskParams, t *mcpTask, times mcpTaskTimes) (*mcpTaskState, error) {
	return t.state(gateway.CallerOf(ctx), times, "complete", declaresElicitation(p.Meta)), nil
}

// updateTask answers tasks/update: each response to a request the task
// has outstanding for the caller decides its approval or answers its
// question, as the caller, through the path every door's decisions and
// answers take. Responses to keys not outstanding are ignored, as the
// extension says; so is a response the turn no longer takes (decided
// already, by someone else or a timeout).
func (m *mcpServer) updateTask(ctx context.Context, p *mcpTaskParams, t *mcpTask, _ mcpTaskTimes) (*mcpAck, error) {
	waiting := t.inputs(gateway.CallerOf(ctx))
	if !declaresElicitation(p.Meta) {
		waiting = nil // it was asked nothing
	}
	for key, resp := range p.InputResponses {
		it, ok := waiting[key]
		res, isElicit := resp.(*mcp.ElicitResult)
		if !ok || !isElicit {
			continue
		}
		if err := m.settle(ctx, p.TaskID, it, res); err != nil {
			switch {
			case agent.IsCode(err, agent.CodeInvalid):
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q]: %s", key, m.s.ClientMessage(ctx, err))}
			case agent.IsCode(err, agent.CodeConflict), agent.IsCode(err, agent.CodeNotFound), agent.IsCode(err, agent.CodePermissionDenied):
				telemetry.Logger(ctx, m.logger).Info("mcp task input not taken", zap.String("stream_id", p.TaskID), zap.String("key", key), zap.Error(err))
			default:
				return nil, m.taskError(ctx, p.TaskID, err)
			}
		}
	}
	return newMCPAck(), nil
}

// cancelTask answers tasks/cancel: the turn is asked to stop, as every
// door's cancel asks it. A task that has ended already is acknowledged
// too: cancellation is cooperative.
func (m *mcpServer) cancelTask(ctx context.Context, p *mcpTaskParams, t *mcpTask, _ mcpTaskTimes) (*mcpAck, error) {
	if t.end != nil {
		return newMCPAck(), nil
	}
	if err := m.cancel(ctx, p.TaskID, "the MCP client cancelled the task"); err != nil && !agent.IsCode(err, agent.CodeConflict) {
		return nil, m.taskError(ctx, p.TaskID, err)
	}
	return newMCPAck(), nil
}

// settle gives the client's elicitation result for the input it that
// turn streamID waits for to the turn, as the caller: an approval decided, or a
// question answered. Whether it came during a call (elicitation/create)
// or through a task (tasks/update), it is one rule, and it goes the way
// every door's decisions and answers go (Service.decide, Service.answer).
// A result that is no decision (cancel; a question declined) leaves the
// event waiting for another person.
func (m *mcpServer) settle(ctx context.Context, streamID string, it projection.Item, res *mcp.ElicitResult) error {
	if it.Question != nil {
		if res.Action != "accept" {
			return nil
		}
		text, _ := res.Content["answer"].(string)
		_, err := m.s.AnswerQuestion(context.WithoutCancel(ctx), streamID, gateway.CallerOf(ctx).AnswerQuestion(it.Tool.CallID, text))
		return err
	}
	var approved bool
	reason := "declined by the MCP client"
	switch res.Action {
	case "accept":
		approved, _ = res.Content["approved"].(bool)
		reason, _ = res.Content["reason"].(string)
	case "decline":
	default:
		return nil
	}
	// Bound to the call the client was asked about: an answer that comes
	// after that call was decided decides no other.
	d := agent.NewApprovalDecision(it.Tool.CallID, approved, reason, "")
	d.ApprovalID = it.Tool.ApprovalID
	_, err := m.s.Decide(context.WithoutCancel(ctx), streamID, d)
	return err
}

// mcpServerKey holds the server of a stateless request, made once for it
// though the SDK asks for it twice.
type mcpServerKey struct{}

// statelessServer is the server of a stateless request.
func (m *mcpServer) statelessServer(r *http.Request) *mcp.Server {
	if srv, ok := r.Context().Value(mcpServerKey{}).(**mcp.Server); ok {
		if *srv == nil {
			*srv = m.newServer(r, true)
		}
		return *srv
	}
	return m.newServer(r, true)
}

// stateless reports whether a request speaks MCP 2026-07-28 or later,
// which is served without sessions.
func stateless(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= mcpTasksVersion
}
