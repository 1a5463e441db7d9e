package mcp

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// A call's log. A client that asks for the server's log messages
// (logging/setLevel in a session, or the log level in a request's _meta)
// is sent what the turn of each of its calls does, as log messages
// (notifications/message) of the logger "agentflow", whether or not the
// call asked for progress: the turn's start, each tool call's start,
// progress and end, the input it waits for, a model call retried, and
// its end. The words are those of the call's progress notifications
// (mcpWording), the answer's previews left out; each message's _meta
// names the turn's event it tells of. The SDK sends only the messages at
// or above the level the client set, and nothing to one that set none.

// mcpLogger names the server's log messages.
const mcpLogger = gateway.ServerName

// log sends the client's log what items, projected from e, tell of the
// turn. A lost message costs the client a line of its log, nothing else.
func (p *mcpProgress) log(ctx context.Context, e agent.Event, items []projection.Item) {
	if p.session == nil {
		return
	}
	for _, it := range items {
		level, msg := p.logged(it)
		if msg == "" {
			continue
		}
		_ = p.session.Log(ctx, &mcp.LoggingMessageParams{Meta: mcp.Meta{mcpEventIndexMeta: e.Index},
			Level: level, Logger: mcpLogger, Data: msg})
	}
}

// logged is the level and the message of what it tells the client's log;
// "" for nothing.
func (w mcpWording) logged(it projection.Item) (mcp.LoggingLevel, string) {
	switch it.Kind {
	case projection.Status:
		if it.Status == agent.StreamRunning {
			return "info", "the turn " + it.Event.StreamID + " is running"
		}
	case projection.End:
		return ended(it)
	case projection.ToolResult:
		if it.Tool.Status != agent.ToolOK {
			return "warning", w.say(it)
		}
	case projection.InputRequired:
		return "notice", w.say(it)
	case projection.Reset:
		return "warning", w.say(it)
	}
	if it.Kind == projection.Status && it.Status == agent.StreamRetrying {
		return "warning", w.say(it)
	}
	return "info", w.say(it)
}

// ended is the level and the message of a turn's end.
func ended(it projection.Item) (mcp.LoggingLevel, string) {
	msg := "the turn " + it.Event.StreamID + " ended " + strings.ToLower(it.Status)
	if it.Error != nil && it.Error.Message != "" {
		msg += ": " + it.Error.Message
	}
	switch it.Status {
	case agent.StreamCompleted:
		return "info", msg
	case agent.StreamCanceled:
		return "warning", msg
	}
	return "error", msg
}
