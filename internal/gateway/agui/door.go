// Package agui serves the AG-UI protocol (1.0) at AGUIPath: RunAgentInput
// in, AG-UI's event stream out, for the agents the catalog exposes
// through it; a turn that waits for a person is an interrupt of the run,
// which the client's next run resumes.
package agui

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerAGUI(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
