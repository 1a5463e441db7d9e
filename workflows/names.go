package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
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

// Signal and query names of AgentTurn.
const (
	// SignalTokens carries an agent.TokenBatch from a streaming model call.
	SignalTokens = "tokens"
	// QueryEvents answers agent.EventsQuery with an agent.EventsPage.
	QueryEvents = "events"
	// SignalNotifyTokens is the signal a turn's notify workflow receives:
	// the same agent.TokenBatch.
	SignalNotifyTokens = "agent_tokens"
	// SignalApprove and UpdateApprove carry an agent.ApprovalDecision; the
	// update refuses unknown and already decided calls.
	SignalApprove = "approve"
	UpdateApprove = "approve"
	// QueryPendingApprovals answers with []agent.PendingApproval.
	QueryPendingApprovals = "pending_approvals"
)

// StartTurnOptions are the options every starter of a turn uses: the
// turn's id, so that starting the same job twice attaches to the first run
// (or its completed result) instead of running it again; its search
// attributes and summary.
func StartTurnOptions(taskQueue string, req agent.TurnRequest) client.StartWorkflowOptions {
	attrs := []temporal.SearchAttributeUpdate{SearchTenant.ValueSet(req.TenantID)}
	if req.AgentID != "" {
		attrs = append(attrs, SearchAgent.ValueSet(req.AgentID))
	}
	if req.SessionID != "" {
		attrs = append(attrs, SearchSession.ValueSet(req.SessionID))
	}
	return client.StartWorkflowOptions{
		ID:                       TurnWorkflowID(req.TenantID, req.JobID),
		TaskQueue:                taskQueue,
		StaticSummary:            Summary(req),
		TypedSearchAttributes:    temporal.NewSearchAttributes(attrs...),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// A caller that runs a worker on the task queue (the gateway in the
		// worker process) gets the first workflow task in the start reply.
		EnableEagerStart: true,
	}
}
