// Package ws serves the WebSocket door: one socket that starts turns,
// follows them, decides approvals and answers questions, with
// acknowledgements and resumption by index.
package ws

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerSocket(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
