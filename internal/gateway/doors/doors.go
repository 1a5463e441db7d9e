// Package doors lists every protocol the gateway serves beside its own
// API, for the server to register: the one place that imports them all,
// so that no door imports another and the core imports none. It gives the
// doors that read the database their stores (stores.go). It also
// gathers how each door says each class of error (ErrorTable), the table
// docs/reference/errors.md shows.
package doors

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/a2a"
	"github.com/agentflow/agentflow/internal/gateway/agui"
	"github.com/agentflow/agentflow/internal/gateway/aisdk"
	"github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/gateway/openai"
	"github.com/agentflow/agentflow/internal/gateway/sse"
	"github.com/agentflow/agentflow/internal/gateway/telegram"
	"github.com/agentflow/agentflow/internal/gateway/ws"
	"github.com/agentflow/agentflow/internal/store"
)

// All are the doors, in the order they register their routes; those that
// read the database beside the core read st, each through an interface
// of its own.
func All(st *store.Store) []gateway.Door {
	return []gateway.Door{openai.New(st), sse.Door, ws.Door, aisdk.Door, mcp.New(mcpStore{st}), agui.New(aguiStore{st}), a2a.New(a2aStore{st}),
		telegram.New(st)}
}

// ErrorTable is how the gateway's API and every door answer each class of
// error (gateway.ErrorClasses), a row each, in the order of
// docs/reference/errors.md. The doors that refuse a request with the HTTP
// API's problem details (Server-Sent Events, WebSocket, the AI SDK's
// chat, AG-UI) render them with the core's WriteProblem, whose statuses
// are agent's table's; the others render from their own rows.
func ErrorTable() []gateway.DoorErrors {
	return []gateway.DoorErrors{
		gateway.GRPCErrors(),
		gateway.HTTPErrors(),
		gateway.ProblemErrors("Server-Sent Events", agent.ChannelSSE),
		gateway.ProblemErrors("WebSocket (the upgrade; then `error` messages with the problem)", agent.ChannelWebSocket),
		openai.Errors,
		gateway.ProblemErrors("AI SDK UI message stream (before it begins; then an `error` chunk)", agent.ChannelAISDK),
		gateway.ProblemErrors("AG-UI (before the run's stream begins; then `RUN_ERROR`)", agent.ChannelAGUI),
		mcp.Errors2025,
		mcp.Errors2026,
		a2a.Errors,
		telegram.Errors,
	}
}
