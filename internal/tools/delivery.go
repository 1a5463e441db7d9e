package tools

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
)

// The delivery rule. Whether a retried call may send again a write an
// earlier attempt may have sent (internal/effects) follows the far side,
// wherever the tool comes from:
//
//   - catalog and toolkit: the entry's `delivery`, else at most once
//     (agent.DeliveryAtMostOnce), for every kind;
//   - an entry's derived tools: the entry's delivery when it wrote one,
//     else the derived tool's own (DerivedDelivery): an MCP tool annotated
//     readOnlyHint or idempotentHint is idempotent (mcpDelivery);
//   - per request, at the egress transport: a method idempotent by
//     definition (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and an OpenAPI
//     operation that declares an Idempotency-Key header (which the call
//     sends, the same on every attempt) are sent again; other writes are
//     gated (effects.Gate).
//
// ExecuteTool gives a call of a tool delivered at most once a gate; the
// egress transport asks it before every write, and the MCP kind before
// every tools/call, over any transport.

// DerivedDelivery is the delivery of a tool that an entry stands for
// (Kind.Resolve's output): the entry's when the catalog wrote one, else
// the derived tool's own.
func DerivedDelivery(entry, derived string) string {
	if entry != "" {
		return entry
	}
	return derived
}

// mcpDelivery is the delivery of a server's tool: idempotent when the
// server says calling it again changes nothing more (readOnlyHint,
// idempotentHint).
func mcpDelivery(t *mcp.Tool) string {
	if a := t.Annotations; a != nil && (a.ReadOnlyHint || a.IdempotentHint) {
		return agent.DeliveryIdempotent
	}
	return ""
}
