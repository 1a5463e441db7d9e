package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"
	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/testserver"
)

// The error table's probes of the JSON-RPC doors, MCP and A2A, sent as
// their protocols' HTTP transports send them.

// rpcAnswerOf reads a JSON-RPC answer (JSON, or the data of an SSE
// stream's event that answers a request) as a door's error: its HTTP
// status and error code, or for a tools/call result with isError,
// "isError" when its _meta says the type of class, else what it says.
func rpcAnswerOf(t require.TestingT, class agent.Code, code int, h http.Header, data []byte) gateway.DoorError {
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				data = []byte(d)
			}
		}
	}
	var msg struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
			Meta    struct {
				Error struct {
					Type string `json:"type"`
				} `json:"agentflow/error"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if json.Unmarshal(data, &msg) != nil {
		return gateway.DoorError{HTTP: code} // not JSON-RPC: the transport's answer
	}
	switch {
	case msg.Error != nil:
		return gateway.DoorError{HTTP: code, Code: strconv.Itoa(msg.Error.Code)}
	case msg.Result != nil && msg.Result.IsError:
		if msg.Result.Meta.Error.Type == class.Class().Type {
			return gateway.DoorError{HTTP: code, Code: "isError"}
		}
		return gateway.DoorError{HTTP: code, Code: "isError of " + msg.Result.Meta.Error.Type}
	}
	return gateway.DoorError{HTTP: code, Code: "result"}
}

// mcpPost posts one JSON-RPC message to the MCP endpoint.
func (e *errEnv) mcpPost(token string, headers map[string]string, msg map[string]any) (int, http.Header, []byte) {
	e.t.Helper()
	body, err := json.Marshal(msg)
	require.NoError(e.t, err)
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.api+mcpdoor.MCPPath, bytes.NewReader(body))
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, resp.Header, data
}

// mcpOld is MCP 2025-11-25, with sessions.
const mcpOld = "2025-11-25"

// mcpSession opens a 2025-11-25 session of token: initialize, then
// initialized. It returns the session's answer to initialize when it is
// refused (ok false).
func (e *errEnv) mcpSession(token string) (session string, refusal gateway.DoorError, ok bool) {
	e.t.Helper()
	code, h, data := e.mcpPost(token, nil, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": mcpOld, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "errtab", "version": "1"}}})
	if code != http.StatusOK {
		return "", rpcAnswerOf(e.t, agent.CodeInternal, code, h, data), false
	}
	session = h.Get("Mcp-Session-Id")
	require.NotEmpty(e.t, session, "%s", data)
	code, _, data = e.mcpPost(token, map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": mcpOld},
		map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	require.Equal(e.t, http.StatusAccepted, code, "%s", data)
	return session, gateway.DoorError{}, true
}

// mcpCall is a tools/call of a 2025-11-25 session of token (a new one
// when session is ""), with the request id id.
func (e *errEnv) mcpCall(class agent.Code, token, session string, id int, tool string, args map[string]any) gateway.DoorError {
	e.t.Helper()
	if session == "" {
		var refusal gateway.DoorError
		var ok bool
		if session, refusal, ok = e.mcpSession(token); !ok {
			return refusal
		}
	}
	code, h, data := e.mcpPost(token, map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": mcpOld},
		map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return rpcAnswerOf(e.t, class, code, h, data)
}

var hiArgs = map[string]any{"prompt": "hi"}

// mcpSessionProbes: MCP 2025-11-25.
var mcpSessionProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpCall(c, e.user, "", 1, "assistant", map[string]any{"question": "hi"})
	},
	agent.CodeUnauthenticated: func(e *errEnv, c agent.Code) gateway.DoorError { return e.mcpCall(c, "", "", 1, "assistant", hiArgs) },
	agent.CodePermissionDenied: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpCall(c, e.approver, "", 1, "assistant", hiArgs)
	},
	agent.CodeNotFound: func(e *errEnv, c agent.Code) gateway.DoorError { return e.mcpCall(c, e.user, "", 1, "nobody", hiArgs) },
	agent.CodeConflict: func(e *errEnv, c agent.Code) gateway.DoorError {
		session, _, ok := e.mcpSession(e.user)
		require.True(e.t, ok)
		require.Equal(e.t, gateway.DoorError{HTTP: http.StatusOK, Code: "result"}, e.mcpCall(c, e.user, session, 5, "assistant", hiArgs))
		// The session's request id 5 again, for another call.
		return e.mcpCall(c, e.user, session, 5, "assistant", map[string]any{"prompt": "What is 2 + 2?"})
	},
	agent.CodeRateLimited: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpCall(c, e.user, "", 1, "assistant", hiArgs)
	},
	agent.CodeUnavailable: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpCall(c, e.user, "", 1, "assistant", hiArgs)
	},
}

// mcpNew is MCP 2026-07-28, stateless.
const mcpNew = "2026-07-28"

// mcpStatelessCall is a 2026-07-28 request of a client that declares no
// extension: a tools/call runs its turn within the request.
func (e *errEnv) mcpStatelessCall(class agent.Code, token, tool string, args map[string]any) gateway.DoorError {
	e.t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": mcpNew,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "errtab", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	code, h, data := e.mcpPost(token, map[string]string{"Mcp-Protocol-Version": mcpNew, "Mcp-Method": "tools/call", "Mcp-Name": tool},
		map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args, "_meta": meta}})
	return rpcAnswerOf(e.t, class, code, h, data)
}

// mcpStatelessProbes: MCP 2026-07-28, which meets no conflict.
var mcpStatelessProbes = map[agent.Code]errProbe{
	agent.CodeInvalid: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpStatelessCall(c, e.user, "assistant", map[string]any{})
	},
	agent.CodeUnauthenticated: func(e *errEnv, c agent.Code) gateway.DoorError { return e.mcpStatelessCall(c, "", "assistant", hiArgs) },
	agent.CodePermissionDenied: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpStatelessCall(c, e.approver, "assistant", hiArgs)
	},
	agent.CodeNotFound: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpStatelessCall(c, e.user, "nobody", hiArgs)
	},
	agent.CodeRateLimited: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpStatelessCall(c, e.user, "assistant", hiArgs)
	},
	agent.CodeUnavailable: func(e *errEnv, c agent.Code) gateway.DoorError {
		return e.mcpStatelessCall(c, e.user, "assistant", hiArgs)
	},
}

// a2aCall sends one JSON-RPC request to assistant's A2A endpoint in the
// version v ("0.3" or "1.0").
func (e *errEnv) a2aCall(v, token, method string, params map[string]any) (int, http.Header, map[string]any) {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(e.t, err)
	code, h, data := e.raw("POST", a2adoor.A2APrefix+"assistant", token, string(body), map[string]string{"A2A-Version": v})
	var msg map[string]any
	require.NoError(e.t, json.Unmarshal(data, &msg), "%d %s", code, data)
	return code, h, msg
}

// a2aSend is a message/send (0.3) and a SendMessage (1.0) of text, for
// task when not "": both must be answered alike, and the answer is read
// as the door's error.
func (e *errEnv) a2aSend(token, text, task string) gateway.DoorError {
	e.t.Helper()
	legacy := map[string]any{"kind": "message", "messageId": "m-" + testserver.RandomID(), "role": "user",
		"parts": []map[string]any{{"kind": "text", "text": text}}}
	v1 := map[string]any{"messageId": "m-" + testserver.RandomID(), "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}
	if task != "" {
		legacy["taskId"], v1["taskId"] = task, task
	}
	return e.a2aBoth(token, "message/send", map[string]any{"message": legacy}, "SendMessage", map[string]any{"message": v1})
}

// a2aBoth sends a request in both versions, which must be answered alike.
func (e *errEnv) a2aBoth(token, legacyMethod string, legacy map[string]any, method string, params map[string]any) gateway.DoorError {
	e.t.Helper()
	answers := make([]gateway.DoorError, 2)
	for i, v := range []struct {
		version, method string
		params          map[string]any
	}{{"0.3", legacyMethod, legacy}, {"1.0", method, params}} {
		code, h, msg := e.a2aCall(v.version, token, v.method, v.params)
		answers[i] = gateway.DoorError{HTTP: code, Code: "result"}
		if rpcErr, ok := msg["error"].(map[string]any); ok {
			answers[i].Code = strconv.Itoa(int(rpcErr["code"].(float64)))
		}
		if code == http.StatusTooManyRequests {
			require.Equal(e.t, "1", h.Get("Retry-After"), "%s: a limit says when to try again", v.version)
		}
	}
	require.Equal(e.t, answers[0], answers[1], "0.3 and 1.0 say it alike")
	return answers[1]
}

// a2aProbes: A2A 0.3 and 1.0, each class in both.
var a2aProbes = map[agent.Code]errProbe{
	agent.CodeInvalid:          func(e *errEnv, _ agent.Code) gateway.DoorError { return e.a2aSend(e.user, " ", "") },
	agent.CodeUnauthenticated:  func(e *errEnv, _ agent.Code) gateway.DoorError { return e.a2aSend("", "hi", "") },
	agent.CodePermissionDenied: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.a2aSend(e.approver, "hi", "") },
	agent.CodeNotFound: func(e *errEnv, _ agent.Code) gateway.DoorError {
		id := "turn/demo/never-" + testserver.RandomID()
		return e.a2aBoth(e.user, "tasks/get", map[string]any{"id": id}, "GetTask", map[string]any{"id": id})
	},
	agent.CodeConflict: func(e *errEnv, _ agent.Code) gateway.DoorError {
		// A task that has ended takes no more messages.
		code, _, msg := e.a2aCall("1.0", e.user, "SendMessage", map[string]any{"message": map[string]any{
			"messageId": "m-" + testserver.RandomID(), "role": "ROLE_USER", "parts": []map[string]any{{"text": "hi"}}}})
		require.Equal(e.t, http.StatusOK, code, "%v", msg)
		task := msg["result"].(map[string]any)["task"].(map[string]any)
		require.Equal(e.t, "TASK_STATE_COMPLETED", task["status"].(map[string]any)["state"])
		return e.a2aSend(e.user, "and then?", task["id"].(string))
	},
	agent.CodeRateLimited: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.a2aSend(e.user, "hi", "") },
	agent.CodeUnavailable: func(e *errEnv, _ agent.Code) gateway.DoorError { return e.a2aSend(e.user, "hi", "") },
}
