// Package aisdk serves the Vercel AI SDK's UI message stream protocol
// (useChat's DefaultChatTransport) at /v1/ui/chat: a chat's messages as
// turns, their events as UI message chunks, approvals answered in the
// next request, and a stream resumed after a reconnect.
package aisdk

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	a := &server{HTTPAPI: api, svc: api.Service()}
	a.registerAISDK(mux)
}

// server is the door on one HTTP API: the core's helpers, and its turn
// service.
type server struct {
	*gateway.HTTPAPI
	svc *gateway.Service
}
