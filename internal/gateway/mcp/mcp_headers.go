package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks methods' routing header. A 2026-07-28 request says in its
// Mcp-Name header what its body names (SEP-2243), so that a gateway can
// route it without reading the body; the SDK checks the header against the
// body for the methods it knows (tools/call, resources/read, prompts/get).
// The Tasks methods are this server's: their name is the task id, and a
// header that names another task is refused as the SDK refuses a
// mismatched tools/call — HTTP 400, -32020 (header mismatch) — before the
// request reaches a handler, since a router may have sent it by that
// header to a gateway the task is not on.

// mcpTaskEnvelope is what taskNameMismatch reads of a message.
type mcpTaskEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		TaskID string `json:"taskId"`
	} `json:"params"`
}

// refuseTaskNameMismatch answers a Tasks request whose Mcp-Name header
// disagrees with its params.taskId, and reports whether it did. Any other
// request is left whole for the SDK (its body read, then put back).
func refuseTaskNameMismatch(w http.ResponseWriter, r *http.Request) bool {
	name := r.Header.Get("Mcp-Name")
	if r.Method != http.MethodPost || name == "" {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "the request body could not be read", http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var env mcpTaskEnvelope
	if json.Unmarshal(body, &env) != nil || env.Params.TaskID == name {
		return false
	}
	switch env.Method {
	case mcpMethodGetTask, mcpMethodUpdateTask, mcpMethodCancelTask:
	default:
		return false
	}
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": env.ID, "error": &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
		Message: fmt.Sprintf("header mismatch: Mcp-Name header value %q does not match body value %q", name, env.Params.TaskID)}})
	if err != nil {
		http.Error(w, "the request could not be answered", http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(data)
	return true
}
