package mcptool

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
)

// The delivery rule is package tools' (delivery.go): a tool an entry
// stands for is delivered as the entry says, else as the tool itself
// says (tools.DerivedDelivery). This is what a server's tool says.

// mcpDelivery is the delivery of a server's tool: idempotent when the
// server says calling it again changes nothing more (readOnlyHint,
// idempotentHint).
func mcpDelivery(t *mcp.Tool) string {
	if a := t.Annotations; a != nil && (a.ReadOnlyHint || a.IdempotentHint) {
		return agent.DeliveryIdempotent
	}
	return ""
}
