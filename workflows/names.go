package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// Names users type in the temporal CLI and other SDKs; stable across releases.
const (
	TaskQueue     = "agentflow"
	AgentTurnName = "AgentTurn"
)

// Search attributes (Keyword) set on every turn. The namespace must have
// them registered; internal/devstack does so for the dev server.
var (
	SearchTenant  = temporal.NewSearchAttributeKeyKeyword("AgentflowTenant")
	SearchAgent   = temporal.NewSearchAttributeKeyKeyword("AgentflowAgent")
	SearchSession = temporal.NewSearchAttributeKeyKeyword("AgentflowSession")
)

// TurnWorkflowID is the id of the AgentTurn for a tenant's job.
func TurnWorkflowID(tenantID, jobID string) string { return "turn/" + tenantID + "/" + jobID }

// Summary is the one-line StaticSummary shown in the Web UI for a turn,
// e.g. "assistant: What is 12.5 * 4?".
func Summary(req agent.TurnRequest) string {
	who := req.AgentID
	if who == "" {
		who = "routed"
	}
	return oneLine(who+": "+req.Prompt, 100)
}
