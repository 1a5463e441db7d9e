// Package a2a serves the A2A protocol, 1.0 and 0.3 on one endpoint with
// one card: agent cards, and tasks that are turns, read from their event
// logs; 0.3 through a2a-go v0.3's JSON-RPC handler over the door's own
// request handler, 1.0 by the door's JSON-RPC binding over the same
// methods (a2a_v1.go says how the versions are told apart).
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
