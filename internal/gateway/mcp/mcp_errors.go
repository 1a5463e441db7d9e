package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// How the door says agentflow's errors. MCP has JSON-RPC codes for what
// is the protocol's (-32602 for invalid params, an unknown tool, a task
// not found; -32603 for an internal error) and says a
// tool's own failure in its result (isError: true), for the model to
// read. So:
//
//   - the transport's: no credential 401, a credential without the user
//     role 403 (the SDK's bearer-token check, with WWW-Authenticate);
//     the tenant's agents unreadable when a session (or a 2026-07-28
//     request) needs its server: 503 or 500, with -32603 (serveFailure);
//   - a tools/call's arguments that are not the agent's input, or a tool
//     that is not there: -32602 (with HTTP 400 to 2026-07-28, as its
//     transport says);
//   - whatever stops a tools/call's turn from starting or ending well — a
//     request id reused for another call (Conflict), the tenant's open
//     streams (RateLimited), a dependency down — is the call's result,
//     isError, whose _meta["agentflow/error"] (mcpErrorMeta) says its
//     type in agent's table, whether a retry may succeed, and for a limit
//     how long to wait first: a host gives the text to its model, a
//     program reads the type;
//   - a Tasks method's task not found (or another tenant's): -32602; any
//     other failure -32603 (taskError).

// mcpErrorMeta names the error's classification in an isError result's
// _meta.
const mcpErrorMeta = "agentflow/error"

// Errors2025 and Errors2026 are the door's rows of the gateway's error
// table: MCP 2025-11-25 (sessions) and 2026-07-28 (stateless, Tasks).
// They differ where the versions do: a call of a 2025-11-25 session may
// reuse a request id of the session for another call (a Conflict,
// isError); a 2026-07-28 request meets no conflict, as its calls have no
// ids of the client's and the Tasks extension acknowledges a cancel of a
// task that has ended and ignores a response to an input no longer
// outstanding.
var (
	Errors2025 = gateway.NewDoorErrors("MCP 2025-11-25 (sessions)", agent.ChannelMCP, func(class agent.Code) gateway.DoorError {
		return mcpClassError(class, false)
	})
	Errors2026 = gateway.NewDoorErrors("MCP "+mcpTasksVersion+" (stateless, Tasks)", agent.ChannelMCP, func(class agent.Code) gateway.DoorError {
		return mcpClassError(class, true)
	})
)

// mcpIsError is how the table shows a call's result with isError.
const mcpIsError = "isError"

// mcpClassError is how a request of the door meets class.
func mcpClassError(class agent.Code, tasks bool) gateway.DoorError {
	switch class {
	case agent.CodeUnauthenticated, agent.CodePermissionDenied:
		return gateway.DoorError{HTTP: class.Class().HTTP}
	case agent.CodeInvalid, agent.CodeNotFound:
		// 2026-07-28's transport answers invalid params with HTTP 400
		// (SEP-2575; the SDK's).
		status := http.StatusOK
		if tasks {
			status = http.StatusBadRequest
		}
		return gateway.DoorError{HTTP: status, Code: jsonrpcCode(jsonrpc.CodeInvalidParams)}
	case agent.CodeConflict:
		if tasks {
			return gateway.DoorError{} // see Errors2026
		}
	case agent.CodeUnavailable:
		return gateway.DoorError{HTTP: http.StatusServiceUnavailable, Code: jsonrpcCode(jsonrpc.CodeInternalError)}
	}
	return gateway.DoorError{HTTP: http.StatusOK, Code: mcpIsError}
}

func jsonrpcCode(c int64) string { return strconv.FormatInt(c, 10) }

// toolError is the result of a call that err stopped: isError, with the
// message a client may read and its classification (mcpErrorMeta).
func (m *mcpServer) toolError(ctx context.Context, err error) *mcp.CallToolResult {
	return toolErrorOf(gateway.ProblemFromStatus(status.Convert(m.s.StatusOf(ctx, err))))
}

// toolErrorOf is the result of a call that the problem p stopped.
func toolErrorOf(p gateway.Problem) *mcp.CallToolResult {
	res := mcpError(p.Detail)
	meta := map[string]any{"type": p.Title, "retryable": p.Retryable}
	if p.RetryAfter > 0 {
		meta["retry_after_ms"] = p.RetryAfter.Milliseconds()
	}
	if p.Reference != "" {
		meta["reference"] = p.Reference
	}
	res.Meta = mcp.Meta{mcpErrorMeta: meta}
	return res
}

// mcpAgentsKey holds, in a request's context, the tenant's agents read
// for the server the request needs (readAgents).
type mcpAgentsKey struct{}

// readAgents reads the tenant's agents for a request that makes a server
// (a session's first, every one of 2026-07-28), before the SDK does: a
// failure is answered here as what it is (serveFailure) rather than as
// the SDK's 400 for a server it was not given.
func (m *mcpServer) readAgents(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	ctx, ok := mcpCaller(r.Context(), auth.TokenInfoFromContext(r.Context()))
	if !ok {
		return r, true // the SDK refuses it
	}
	agents, err := m.st.ListAgents(ctx, gateway.TenantOf(ctx))
	if err != nil {
		m.serveFailure(w, r, err)
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), mcpAgentsKey{}, agents)), true
}

// serveFailure answers a request the door could not serve before the
// SDK read it: the status of err's class (503 for a dependency down, 500
// for a bug) and a JSON-RPC error, -32603, with the request's id.
func (m *mcpServer) serveFailure(w http.ResponseWriter, r *http.Request, err error) {
	p := gateway.ProblemFromStatus(status.Convert(m.s.StatusOf(r.Context(), err)))
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		_ = json.Unmarshal(body, &head)
	}
	if len(head.ID) == 0 {
		head.ID = json.RawMessage("null")
	}
	data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": head.ID, "error": map[string]any{
		"code": jsonrpc.CodeInternalError, "message": p.Detail, "data": map[string]any{"type": p.Title, "retryable": p.Retryable}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.Status)
	_, _ = w.Write(data)
}

// turnFailure is the classification (mcpErrorMeta) of a turn that did
// not complete: its error's type and retryability, Canceled for a turn
// cancelled without one.
func turnFailure(end *projection.Item) map[string]any {
	typ, retryable := agent.ErrTypeInternal, false
	if end != nil && end.Status == agent.StreamCanceled {
		typ = agent.ErrTypeCanceled
	}
	if end != nil && end.Error != nil && end.Error.Type != "" {
		typ, retryable = end.Error.Type, end.Error.Retryable
	}
	return map[string]any{"type": typ, "retryable": retryable}
}
