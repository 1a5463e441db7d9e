// Package mcp serves the Model Context Protocol at MCPPath with the
// official MCP Go SDK's Streamable HTTP server: agents as tools, a call as
// a durable turn. Clients of MCP 2025-11-25 and before get sessions, whose
// streams resume across gateways (mcp.go, mcp_resume.go); clients of
// 2026-07-28 get stateless requests and the Tasks extension, a task being
// the turn itself, by its stream id (mcp_tasks.go, mcp_task.go,
// mcp_mrtr.go).
package mcp

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerMCP(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
