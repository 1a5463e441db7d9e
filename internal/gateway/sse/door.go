// Package sse serves a turn's events as Server-Sent Events: follow a
// turn, start one, or send a conversation a message, and read what the
// turn logs, resuming with Last-Event-ID.
package sse

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerSSE(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
