package gateway

import (
	"context"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// What the doors read of the store, each read scoped to the request's
// tenant (TenantOf): a door names no tenant of its own and reaches no
// table but through these.

// Agent is the active version of the tenant's agent id.
func (s *Service) Agent(ctx context.Context, id string) (agent.Agent, error) {
	return s.store.ActiveAgent(ctx, TenantOf(ctx), id)
}

// Agents are the tenant's agents, each its active version.
func (s *Service) Agents(ctx context.Context) ([]agent.Agent, error) {
	return s.store.ListAgents(ctx, TenantOf(ctx))
}

// Settings are the tenant's runtime settings.
func (s *Service) Settings(ctx context.Context) (store.TenantSettings, error) {
	return s.store.TenantSettings(ctx, TenantOf(ctx))
}

// TurnRow is the tenant's turn jobID as stored.
func (s *Service) TurnRow(ctx context.Context, jobID string) (store.Turn, error) {
	return s.store.Turn(ctx, TenantOf(ctx), jobID)
}

// Blob and BlobInfo read a blob the tenant may read, by its ref.
func (s *Service) Blob(ctx context.Context, ref string) ([]byte, string, error) {
	return s.store.TenantBlob(ctx, TenantOf(ctx), ref)
}

func (s *Service) BlobInfo(ctx context.Context, ref string) (agent.BlobInfo, error) {
	return s.store.TenantBlobInfo(ctx, TenantOf(ctx), ref)
}

// WebhookAgent is the active version of tenant's agent id, for a door
// that authenticates a webhook by a secret of the agent's own (Telegram)
// and so knows the tenant only from the path it then checks.
func (s *Service) WebhookAgent(ctx context.Context, tenant, id string) (agent.Agent, error) {
	return s.store.ActiveAgent(ctx, tenant, id)
}

// MCPStream is the record of one of the MCP door's resumable streams.
type MCPStream = store.MCPStream

// MCPStreams keeps the MCP door's resumable streams: what each session's
// streams sent, so that a client resumes one from its last event id.
type MCPStreams interface {
	MCPOpen(ctx context.Context, st MCPStream) error
	MCPAppend(ctx context.Context, sessionID, streamID string, data []byte) error
	MCPAfter(ctx context.Context, sessionID, streamID string, after int) ([][]byte, error)
	MCPStreamOf(ctx context.Context, sessionID, streamID string) (MCPStream, error)
	MCPSessionClosed(ctx context.Context, sessionID string) error
}

// MCPStreams are the MCP door's streams.
func (s *Service) MCPStreams() MCPStreams { return s.store }
