package mcp

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestMCPToolError: what stops a call's turn is the call's result,
// isError, its text the message a client may read and its _meta the
// error's type, whether to retry and, for a limit, after how long — the
// internal class too, which no request can honestly provoke, with its
// reference to the log. The rows say isError for the classes a call
// meets so.
func TestMCPToolError(t *testing.T) {
	for _, class := range []agent.Code{agent.CodeConflict, agent.CodeRateLimited, agent.CodeInternal} {
		t.Run(string(class), func(t *testing.T) {
			st := status.Convert(gateway.Status(context.Background(), zap.NewNop(), agent.Errorf(class, "refused")))
			res := toolErrorOf(gateway.ProblemFromStatus(st))
			require.True(t, res.IsError)
			meta := res.Meta[mcpErrorMeta].(map[string]any)
			require.Equal(t, class.Class().Type, meta["type"])
			text := res.Content[0].(*mcp.TextContent).Text
			switch class {
			case agent.CodeRateLimited:
				require.Equal(t, true, meta["retryable"])
				require.Equal(t, gateway.LimitRetryAfter.Milliseconds(), meta["retry_after_ms"])
				require.Equal(t, "refused", text)
			case agent.CodeInternal:
				require.NotEmpty(t, meta["reference"])
				require.Contains(t, text, "internal error (reference ")
				require.NotContains(t, text, "refused", "a bug's details stay in the log")
			}
			require.Equal(t, gateway.DoorError{HTTP: 200, Code: mcpIsError}, Errors2025.Errors[class])
		})
	}
	require.Equal(t, gateway.DoorError{}, Errors2026.Errors[agent.CodeConflict], "2026-07-28 meets no conflict")
}

// TestMCPTurnFailure: a failed turn's result says its error's type.
func TestMCPTurnFailure(t *testing.T) {
	failed := agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed,
		Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed", Retryable: true}}
	res := newMCPTask("turn/demo/j", []agent.Event{failed}).result()
	require.Equal(t, map[string]any{"type": agent.ErrTypeModelFailed, "retryable": true}, res.Meta[mcpErrorMeta])
	canceled := agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled}
	res = newMCPTask("turn/demo/j", []agent.Event{canceled}).result()
	require.Equal(t, map[string]any{"type": agent.ErrTypeCanceled, "retryable": false}, res.Meta[mcpErrorMeta])
}
