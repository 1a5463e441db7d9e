package contract

import (
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// Long-term memory's part of the contract.
const (
	// MemoryExtract keeps a conversation's durable facts about its user
	// as memories (agent.MemoryRecord) once it has gone idle: input
	// MemoryExtractInput, result ExtractMemoriesResult. A Conversation
	// starts it, id MemoryExtractWorkflowID, and does not wait for it.
	MemoryExtract = "MemoryExtract"
	// ExtractMemories is its activity: MemoryExtractInput →
	// ExtractMemoriesResult.
	ExtractMemories = "ExtractMemories"
)

// MemoryExtractWorkflowID is the id of the extraction of a session's
// transcript through turn Through: one per (session, position), so that
// the same position is never extracted twice.
func MemoryExtractWorkflowID(tenantID, sessionID string, through int) string {
	return fmt.Sprintf("memx/%s/%s/%d", tenantID, sessionID, through)
}

// MemoryExtractInput names a session, its agent (empty: the tenant's
// default), the caller whose memories its facts become (from the
// credential of the session's latest message), and how far the
// transcript had come (turns answered).
type MemoryExtractInput struct {
	TenantID  string        `json:"tenant_id"`
	SessionID string        `json:"session_id"`
	AgentID   string        `json:"agent_id,omitempty"`
	Caller    *agent.Caller `json:"caller,omitempty"`
	Through   int           `json:"through"`
}

// Origin is what the memories of the extraction are marked with
// (agent.MemoryRecord.Origin): "<session>@<through>".
func (in MemoryExtractInput) Origin() string { return fmt.Sprintf("%s@%d", in.SessionID, in.Through) }

// ExtractMemoriesResult says what the extraction stored: Stored new
// memories; Skipped says why it stored none without asking a model (the
// agent does not extract, no caller, done before).
type ExtractMemoriesResult struct {
	Stored  int    `json:"stored"`
	Skipped string `json:"skipped,omitempty"`
}
