package doors

import (
	"context"

	"github.com/agentflow/agentflow/internal/gateway/agui"
	"github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/store"
)

// The doors read the database through narrow interfaces of their own,
// whose records are theirs: the adapters below give them the store's,
// so that no door links internal/store.

// a2aStore is the store as the A2A door reads it.
type a2aStore struct{ *store.Store }

func (s a2aStore) DefaultAgent(ctx context.Context, tenantID string) (string, error) {
	rt, err := s.TenantSettings(ctx, tenantID)
	return rt.DefaultAgent, err
}

// aguiStore is the store as the AG-UI door reads it.
type aguiStore struct{ *store.Store }

func (s aguiStore) Turn(ctx context.Context, tenantID, jobID string) (agui.Turn, error) {
	t, err := s.Store.Turn(ctx, tenantID, jobID)
	return agui.Turn{AgentID: t.AgentID, SessionID: t.SessionID}, err
}

// mcpStore is the store as the MCP door keeps its streams in it. Its
// Stream has the fields of the store's MCPStream, in the same order, and
// converts to and from it.
type mcpStore struct{ *store.Store }

func (s mcpStore) MCPOpen(ctx context.Context, st mcp.Stream) error {
	return s.Store.MCPOpen(ctx, store.MCPStream(st))
}

func (s mcpStore) MCPStreamOf(ctx context.Context, sessionID, streamID string) (mcp.Stream, error) {
	st, err := s.Store.MCPStreamOf(ctx, sessionID, streamID)
	return mcp.Stream(st), err
}
