// Package doors lists every protocol the gateway serves beside its own
// API, for the server to register: the one place that imports them all,
// so that no door imports another and the core imports none.
package doors

import (
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
