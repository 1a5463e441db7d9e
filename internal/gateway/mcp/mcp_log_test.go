package mcp

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// TestLogged: what a turn's items tell the client's log, at which level.
func TestLogged(t *testing.T) {
	calc := &agent.ToolEvent{CallID: "c1", Name: "calc"}
	failed := &agent.ToolEvent{CallID: "c2", Name: "calc", Status: agent.ToolError}
	ev := agent.Event{StreamID: "turn/demo/j"}
	for _, tc := range []struct {
		name  string
		it    projection.Item
		level mcp.LoggingLevel
		msg   string
	}{
		{"running", projection.Item{Kind: projection.Status, Status: agent.StreamRunning, Event: ev}, "info", "the turn turn/demo/j is running"},
		{"a tool call", projection.Item{Kind: projection.ToolStart, Tool: calc}, "info", "calling the tool calc"},
		{"a tool call failed", projection.Item{Kind: projection.ToolResult, Tool: failed}, "warning", "the tool calc ended error"},
		{"a model call retried", projection.Item{Kind: projection.Reset}, "warning", "the model call is retried"},
		{"waiting", projection.Item{Kind: projection.InputRequired, Tool: &agent.ToolEvent{CallID: "c1", Name: "calc", ApprovalID: "a1"}, Event: ev},
			"notice", "waiting for a person to approve the call c1 of calc (approve it over the approvals API: approval a1, stream turn/demo/j)"},
		{"completed", projection.Item{Kind: projection.End, Status: agent.StreamCompleted, Event: ev}, "info", "the turn turn/demo/j ended completed"},
		{"failed", projection.Item{Kind: projection.End, Status: agent.StreamFailed, Event: ev, Error: &agent.TurnError{Message: "the model failed"}},
			"error", "the turn turn/demo/j ended failed: the model failed"},
		{"canceled", projection.Item{Kind: projection.End, Status: agent.StreamCanceled, Event: ev}, "warning", "the turn turn/demo/j ended canceled"},
		{"text says nothing", projection.Item{Kind: projection.Delta, Part: projection.Text, Text: "4"}, "info", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level, msg := mcpWording{}.logged(tc.it)
			require.Equal(t, tc.msg, msg)
			if msg != "" {
				require.Equal(t, tc.level, level)
			}
		})
	}
}
