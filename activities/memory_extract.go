package activities

import (
	"cmp"
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/memory"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/store"
)

// Memories keeps long-term memories (internal/knowledge.Memories).
type Memories interface {
	RememberAll(ctx context.Context, scope agent.MemoryScope, mems []agent.MemoryRecord) ([]agent.MemoryRecord, int, error)
	HasOrigin(ctx context.Context, scope agent.MemoryScope, origin string) (bool, error)
	Recall(ctx context.Context, scope agent.MemoryScope, text string, topK int) ([]agent.MemoryRecord, agent.Usage, error)
}

// ExtractMemories stores the durable facts of a session about its caller
// as memories of the caller with the session's agent, when the agent's
// memory says extract: the agent's summary model (else its model) reads
// the session's summary and latest messages and lists them. Its facts
// are stored all in one transaction, marked with the extraction's origin
// (session and position); a retry that finds that origin's memories
// stored asks no model again, and one that does not stores the same
// facts once (a memory's id is its scope's and text's).
func (a *Activities) ExtractMemories(ctx context.Context, in contract.MemoryExtractInput) (contract.ExtractMemoriesResult, error) {
	if a.memories == nil {
		return contract.ExtractMemoriesResult{Skipped: "no memory store"}, nil
	}
	user := in.Caller.Principal()
	if user == "" {
		return contract.ExtractMemoriesResult{Skipped: "no authenticated caller"}, nil
	}
	ag, err := a.sessionAgent(ctx, in.TenantID, in.AgentID)
	if err != nil || ag == nil {
		return contract.ExtractMemoriesResult{Skipped: "no agent"}, err
	}
	if !ag.Memory.Extract {
		return contract.ExtractMemoriesResult{Skipped: "the agent does not extract memories"}, nil
	}
	scope := agent.MemoryScope{Tenant: in.TenantID, AgentID: ag.ID, User: user}
	done, err := a.memories.HasOrigin(ctx, scope, in.Origin())
	if err != nil {
		return contract.ExtractMemoriesResult{}, err
	}
	if done {
		return contract.ExtractMemoriesResult{Skipped: "extracted before"}, nil
	}
	mem, err := a.store.SessionMemory(ctx, in.TenantID, in.SessionID, memory.ExtractRead)
	if err != nil {
		return contract.ExtractMemoriesResult{}, err
	}
	if len(mem.Recent) == 0 {
		return contract.ExtractMemoriesResult{Skipped: "an empty transcript"}, nil
	}
	model := cmp.Or(ag.Memory.SummaryModel, ag.Model)
	// The extraction's model call and the embeddings of what it keeps are
	// charged to the tenant under the extraction's origin: the same for
	// every attempt.
	key := "memory:" + in.Origin()
	c := metered.Call{TenantID: in.TenantID, Key: key, Kind: store.KindMemory, AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID}
	resp, err := a.meteredCall(ctx, c, llm.Request{
		Model:     model,
		Messages:  []agent.Message{{Role: agent.RoleSystem, Content: memory.ExtractorPrompt}, {Role: agent.RoleUser, Content: memory.ExtractionTranscript(mem.Summary, sessionMessages(mem.Recent))}},
		MaxTokens: memory.SummaryMaxTokens,
	})
	if err != nil {
		return contract.ExtractMemoriesResult{}, err
	}
	facts := memory.ParseFacts(resp.Message.Content)
	if len(facts) == 0 {
		return contract.ExtractMemoriesResult{}, nil
	}
	recs := make([]agent.MemoryRecord, len(facts))
	for i, f := range facts {
		recs[i] = agent.MemoryRecord{Text: f, Source: agent.MemoryExtracted, Origin: in.Origin()}
	}
	ctx = withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: key + ":embed", AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID}, nil)
	_, stored, err := a.memories.RememberAll(ctx, scope, recs)
	if err != nil {
		return contract.ExtractMemoriesResult{}, fmt.Errorf("store extracted memories: %w", err)
	}
	a.logger.Info("memories extracted", zap.String("tenant", in.TenantID), zap.String("session_id", in.SessionID),
		zap.String("agent_id", ag.ID), zap.Int("through", in.Through), zap.Int("stored", stored))
	return contract.ExtractMemoriesResult{Stored: stored}, nil
}

// sessionAgent is the active version of agentID, else of the tenant's
// default agent; nil when there is neither.
func (a *Activities) sessionAgent(ctx context.Context, tenantID, agentID string) (*agent.Agent, error) {
	if agentID == "" {
		settings, err := a.tenants.Settings(ctx, tenantID)
		if err != nil {
			return nil, err
		}
		agentID = settings.DefaultAgent
	}
	if agentID == "" {
		return nil, nil
	}
	ag, err := a.store.ActiveAgent(ctx, tenantID, agentID)
	if err != nil {
		return nil, fmt.Errorf("load agent %q: %w", agentID, agentNotFound(err))
	}
	return &ag, nil
}
