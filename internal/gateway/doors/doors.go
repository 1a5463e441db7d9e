// Package doors lists every protocol the gateway serves beside its own
// API, for the server to register: the one place that imports them all,
// so that no door imports another and the core imports none. It also
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
)

// All are the doors, in the order they register their routes.
func All() []gateway.Door {
	return []gateway.Door{openai.Door, sse.Door, ws.Door, aisdk.Door, mcp.Door, agui.Door, a2a.Door, telegram.Door}
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
