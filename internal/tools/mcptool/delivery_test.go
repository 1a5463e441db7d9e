package mcptool_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/mcptool"
)

// TestDelivery: an MCP tool the server says is read-only or idempotent
// is idempotent, any other is the default; an entry's delivery, when the
// catalog wrote one, is its derived tools'.
func TestDelivery(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations *mcp.ToolAnnotations
		entry, want string
	}{
		{"no annotations", nil, "", ""},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: new(bool)}, "", ""},
		{"read-only", &mcp.ToolAnnotations{ReadOnlyHint: true}, "", agent.DeliveryIdempotent},
		{"idempotent", &mcp.ToolAnnotations{IdempotentHint: true}, "", agent.DeliveryIdempotent},
		{"the entry says at most once", &mcp.ToolAnnotations{IdempotentHint: true}, agent.DeliveryAtMostOnce, agent.DeliveryAtMostOnce},
		{"the entry says idempotent", nil, agent.DeliveryIdempotent, agent.DeliveryIdempotent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			derived := MCPDelivery(&mcp.Tool{Name: "x", Annotations: tc.annotations})
			require.Equal(t, tc.want, tools.DerivedDelivery(tc.entry, derived))
		})
	}
}
