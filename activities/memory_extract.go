package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/store"
)

// Memories keeps long-term memories (internal/knowledge.Memories).
type Memories interface {
	RememberAll(ctx context.Context, scope agent.MemoryScope, mems []agent.MemoryRecord) ([]agent.MemoryRecord, int, error)
	HasOrigin(ctx context.Context, scope agent.MemoryScope, origin string) (bool, error)
	Recall(ctx context.Context, scope agent.MemoryScope, text string, topK int) ([]agent.MemoryRecord, agent.Usage, error)
}

// extractRead is how many of a session's latest messages an extraction
// reads.
const extractRead = 40

// maxExtracted bounds the facts one extraction keeps.
const maxExtracted = 10

// extractorPrompt is the system prompt of the model call that finds a
// conversation's durable facts.
const extractorPrompt = "You keep a long-term memory of a user for an assistant. From the conversation, " +
	"list the durable facts about the user worth remembering in later conversations: preferences, " +
	"names, circumstances, standing instructions. Leave out anything about this conversation only, " +
	"guesses, and secrets (passwords, keys, card numbers). Each fact is one short self-contained " +
	"sentence. Reply with a JSON array of strings only, [] when there is nothing to keep."

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
	mem, err := a.store.SessionMemory(ctx, in.TenantID, in.SessionID, extractRead)
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
		Messages:  []agent.Message{{Role: agent.RoleSystem, Content: extractorPrompt}, {Role: agent.RoleUser, Content: transcriptForExtraction(mem.Summary, mem.Recent)}},
		MaxTokens: summaryMaxTokens,
	})
	if err != nil {
		return contract.ExtractMemoriesResult{}, err
	}
	facts := parseFacts(resp.Message.Content)
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

// transcriptForExtraction is the conversation the extractor reads.
func transcriptForExtraction(summary string, msgs []store.SessionMessage) string {
	var b strings.Builder
	if summary != "" {
		b.WriteString("Summary of the earlier conversation:\n")
		b.WriteString(summary)
		b.WriteString("\n\n")
	}
	b.WriteString("Conversation:\n")
	for _, m := range msgs {
		text, _ := truncate(m.Content, 4096)
		fmt.Fprintf(&b, "%s: %s\n", m.Role, text)
	}
	return b.String()
}

// parseFacts reads the extractor's answer: the JSON array of strings in
// it (a model may wrap it in prose or a code fence), each fact trimmed,
// empty and over-long ones dropped, at most maxExtracted. An answer
// without one is no facts.
func parseFacts(answer string) []string {
	start, end := strings.Index(answer, "["), strings.LastIndex(answer, "]")
	if start < 0 || end < start {
		return nil
	}
	var raw []string
	if err := json.Unmarshal([]byte(answer[start:end+1]), &raw); err != nil {
		return nil
	}
	var out []string
	for _, f := range raw {
		text, _, err := agent.NormalizeMemory(f, nil)
		if err != nil {
			continue
		}
		out = append(out, text)
		if len(out) == maxExtracted {
			break
		}
	}
	return out
}
