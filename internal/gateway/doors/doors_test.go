package doors

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestDoorChannels: every door names its own channel, one of the closed
// list, and no two doors share one.
func TestDoorChannels(t *testing.T) {
	got := map[string]bool{}
	for _, d := range All(nil) {
		require.True(t, agent.KnownChannel(d.Channel()), d.Channel())
		require.False(t, got[d.Channel()], "two doors name %s", d.Channel())
		got[d.Channel()] = true
	}
	require.Equal(t, map[string]bool{agent.ChannelOpenAI: true, agent.ChannelSSE: true, agent.ChannelWebSocket: true,
		agent.ChannelAISDK: true, agent.ChannelMCP: true, agent.ChannelAGUI: true, agent.ChannelA2A: true, agent.ChannelTelegram: true}, got)
}

// TestErrorTable: every door has a row of the error table, with an
// answer for every class, and docs/reference/errors.md shows the table
// as the code has it.
func TestErrorTable(t *testing.T) {
	rows := map[string]bool{}
	for _, r := range ErrorTable() {
		require.Len(t, r.Errors, len(gateway.ErrorClasses()), r.Door)
		for _, c := range gateway.ErrorClasses() {
			_, ok := r.Errors[c]
			require.True(t, ok, "%s: %s", r.Door, c)
		}
		rows[r.Channel] = true
	}
	for _, d := range All(nil) {
		require.True(t, rows[d.Channel()], "door %s has a row", d.Channel())
	}
	require.True(t, rows[""], "the API's own rows")
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "reference", "errors.md"))
	require.NoError(t, err)
	require.Contains(t, string(page), gateway.ErrorTableMarkdown(ErrorTable()),
		"docs/reference/errors.md shows the table of doors.ErrorTable (print it with gateway.ErrorTableMarkdown)")
}
