package mcp

import (
	"context"
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
)

// Store is what the door keeps and reads beside the core: the tenant's
// agents and blobs, and its sessions' resumable streams. The server
// gives it one over the database (internal/gateway/doors), so that the
// door itself links no store.
type Store interface {
	ListAgents(ctx context.Context, tenantID string) ([]agent.Agent, error)
	TenantBlobInfo(ctx context.Context, tenantID, ref string) (agent.BlobInfo, error)
	TenantBlob(ctx context.Context, tenantID, ref string) ([]byte, string, error)
	// MCPOpen records a stream; opening it again changes nothing.
	MCPOpen(ctx context.Context, st Stream) error
	// MCPAppend appends a message to a stream (nil: the priming event).
	MCPAppend(ctx context.Context, sessionID, streamID string, data []byte) error
	// MCPAfter is a stream's messages after the index after, in order
	// (-1: all); an error when one is missing.
	MCPAfter(ctx context.Context, sessionID, streamID string, after int) ([][]byte, error)
	// MCPStreamOf is a stream's record; agent.CodeNotFound when none.
	MCPStreamOf(ctx context.Context, sessionID, streamID string) (Stream, error)
	// MCPSessionClosed drops a session's streams.
	MCPSessionClosed(ctx context.Context, sessionID string) error
}

// Stream is a stream of an MCP session: whose it is and, for a
// tools/call's, the call it answers.
type Stream struct {
	SessionID, StreamID string
	TenantID, UserID    string
	// RequestID and ProgressToken are the call's JSON-RPC id and progress
	// token, as the client sent them; JobID is its turn's job id. All
	// empty for a stream that answers no tools/call.
	RequestID     json.RawMessage
	ProgressToken json.RawMessage
	JobID         string
}
