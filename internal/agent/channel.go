package agent

import (
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// Channels: the door a turn came through (TurnRequest.Channel). The list
// is closed, so that usage, metrics and search can split by it without
// a caller's text becoming a label.
const (
	ChannelGRPC      = "grpc"      // AgentService over gRPC
	ChannelHTTP      = "http"      // the HTTP/JSON API (/v1/…)
	ChannelSSE       = "sse"       // the SSE routes (…:stream), and the chat page that uses them
	ChannelWebSocket = "websocket" // /v1/ws
	ChannelOpenAI    = "openai"    // chat completions and responses (/v1/chat/completions, /v1/responses)
	ChannelAISDK     = "aisdk"     // the Vercel AI SDK's chat (/v1/ui/chat)
	ChannelMCP       = "mcp"       // MCP tools and tasks (/mcp)
	ChannelA2A       = "a2a"       // A2A messages and tasks
	ChannelAGUI      = "agui"      // AG-UI runs
	ChannelTelegram  = "telegram"  // a Telegram bot's webhook (/v1/telegram/…)
	// ChannelTemporal is a turn started through Temporal directly (the
	// temporal CLI, any SDK) that names no channel: the turn sets it.
	ChannelTemporal = "temporal"
	ChannelSchedule = "schedule" // a Temporal schedule's run
	ChannelProcess  = "process"  // a child turn of a process's workflow
	ChannelDelegate = "delegate" // a turn another turn delegated to (delegate_to_agent)
	ChannelEval     = "eval"     // a case of an evaluation
	ChannelNexus    = "nexus"    // the Nexus service agentflow.v1.Agents, through an endpoint
	// ChannelRetry is a turn a person tried again from one of its steps
	// ("try again from here" on the turn page): a replay of the recorded
	// turn (Replay) with what the person edited.
	ChannelRetry = "retry"
)

// channels are the known channels, in the order the docs list them.
var channels = []string{ChannelGRPC, ChannelHTTP, ChannelSSE, ChannelWebSocket, ChannelOpenAI, ChannelAISDK, ChannelMCP,
	ChannelA2A, ChannelAGUI, ChannelTelegram, ChannelTemporal, ChannelSchedule, ChannelProcess, ChannelDelegate, ChannelEval, ChannelNexus, ChannelRetry}

// KnownChannel reports whether c is one of channels.
func KnownChannel(c string) bool { return slices.Contains(channels, c) }

// validateChannel checks a request's or a message's channel: empty (the
// turn sets it) or one of channels.
func validateChannel(c string) error {
	if c == "" || KnownChannel(c) {
		return nil
	}
	return Errorf(CodeInvalid, "channel %q is not a channel: want one of %s, or none", words.Clip(c, 50), strings.Join(channels, ", "))
}
