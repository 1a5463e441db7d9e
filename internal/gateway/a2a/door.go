// Package a2a serves the A2A protocol: agent cards, and tasks that are
// turns, read from their event logs, through a2a-go's JSON-RPC handler
// over the door's own request handler.
package a2a

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerA2A(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
