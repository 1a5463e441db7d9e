package contract

import "github.com/agentflow/agentflow/internal/agent"

// Prepare runs one step of an agent's prepare phase (agent.Prepare)
// before the turn's first model call: PrepareInput → PrepareResult.
const Prepare = "Prepare"

// PrepareInput names the turn, its pinned agent and the step.
type PrepareInput struct {
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	Step         string `json:"step"` // agent.PrepareClassify, PrepareReformulate or PrepareRetrieve
	// Query is what retrieve searches for: the reformulated prompt, else
	// the prompt (read from the turn's step 0 when empty).
	Query string `json:"query,omitempty"`
	// Seq is the step retrieve stores the context message under.
	Seq int `json:"seq,omitempty"`
}

// PrepareResult is what a step found: classify's label, reformulate's
// query, retrieve's citations.
type PrepareResult struct {
	Label     string           `json:"label,omitempty"`
	Query     string           `json:"query,omitempty"`
	Citations []agent.Citation `json:"citations,omitempty"`
}
