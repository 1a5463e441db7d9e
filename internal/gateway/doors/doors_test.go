package doors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestDoorChannels: every door names its own channel, one of the closed
// list, and no two doors share one.
func TestDoorChannels(t *testing.T) {
	got := map[string]bool{}
	for _, d := range All() {
		require.True(t, agent.KnownChannel(d.Channel()), d.Channel())
		require.False(t, got[d.Channel()], "two doors name %s", d.Channel())
		got[d.Channel()] = true
	}
	require.Equal(t, map[string]bool{agent.ChannelOpenAI: true, agent.ChannelSSE: true, agent.ChannelWebSocket: true,
		agent.ChannelAISDK: true, agent.ChannelMCP: true, agent.ChannelAGUI: true, agent.ChannelA2A: true, agent.ChannelTelegram: true}, got)
}
