// Package openai serves the OpenAI-compatible API: chat completions, whole
// and streamed, the Responses API (responses whole, streamed, in the
// background, retrieved, resumed after a sequence number and cancelled:
// openai_responses.go), and the models list, for clients such as
// openai-go and the openai npm package.
package openai

import (
	"net/http"

	"github.com/agentflow/agentflow/internal/gateway"
)

// Door serves the door on the HTTP API's listener.
type Door struct{}

// Register implements gateway.Door.
func (Door) Register(mux *http.ServeMux, api *gateway.HTTPAPI) {
	openAI{s: api.Service()}.register(mux)
}
