package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
)

// TestMCPTypeScriptSession: the TypeScript SDK's own client
// (@modelcontextprotocol/sdk 1.32, which speaks MCP up to 2025-11-25)
// gets what such clients got before 2026-07-28: a session, the tools, and
// a call answered with progress and the turn's text — the stored result.
// It needs Node.js (with npm): without it the test skips, except under CI.
func TestMCPTypeScriptSession(t *testing.T) {
	dir := nodeClient(t, "mcp", "@modelcontextprotocol/sdk")
	e := newTasksEnv(t)
	out := runNode(t, dir, "session.mjs", nodeInput(t, map[string]string{"url": e.api + mcpdoor.MCPPath, "token": e.all, "tool": "assistant", "prompt": "What is 6 * 7?"}))
	var got struct {
		Protocol, Session, Text, StreamID string
		Tools, Progress                   []string
		IsError                           bool
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Equal(t, "2025-11-25", got.Protocol)
	require.NotEmpty(t, got.Session, "a session")
	require.ElementsMatch(t, []string{"assistant", "careful", "planner"}, got.Tools)
	require.False(t, got.IsError)
	require.Contains(t, got.Progress, "calling the tool calculator")
	stored, err := e.Store().Result(context.Background(), "demo", strings.TrimPrefix(got.StreamID, "turn/demo/"))
	require.NoError(t, err)
	require.Equal(t, stored.Output, got.Text)
	require.Equal(t, "The result is 42.", got.Text)
}
