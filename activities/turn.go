package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
)

// RouteInput asks which agent should answer a request.
type RouteInput struct {
	TenantID string            `json:"tenant_id"`
	AgentID  string            `json:"agent_id,omitempty"`
	Prompt   string            `json:"prompt"`
	Context  agent.TurnContext `json:"context"`
}

// RouteResult names the chosen agent and the rule that chose it.
type RouteResult struct {
	AgentID string `json:"agent_id"`
	// Rule is "explicit" when the request named the agent, "default" for the
	// tenant's default agent, else the name of the routing rule that matched.
	Rule string `json:"rule"`
	// CatalogVersion is the tenant's catalog version the rules came from.
	CatalogVersion int64 `json:"catalog_version,omitempty"`
	// RuleErrors are rules skipped because their condition failed.
	RuleErrors []routing.RuleError `json:"rule_errors,omitempty"`
}

// Route rules that are not routing rules.
const (
	RuleExplicit = "explicit"
	RuleDefault  = "default"
)

// Route picks the agent for a request: the one it names, else the first
// of the tenant's routing rules that matches, else the tenant's default.
// It reads a cached, compiled snapshot of the tenant's rules, so it runs as
// a local activity.
func (a *Activities) Route(ctx context.Context, in RouteInput) (RouteResult, error) {
	if in.AgentID != "" {
		return RouteResult{AgentID: in.AgentID, Rule: RuleExplicit}, nil
	}
	if a.Routes == nil {
		id, err := a.Store.DefaultAgent(ctx, in.TenantID)
		if err != nil {
			return RouteResult{}, classify(fmt.Errorf("route: %w", err), agent.ErrTypeAgentNotFound)
		}
		return RouteResult{AgentID: id, Rule: RuleDefault}, nil
	}
	snap, err := a.Routes.Routing(ctx, in.TenantID)
	if err != nil {
		return RouteResult{}, classify(fmt.Errorf("route: %w", err), agent.ErrTypeAgentNotFound)
	}
	d, err := snap.Table.Route(routing.Input{
		TenantID: in.TenantID, UserRole: in.Context.UserRole, UIPage: in.Context.UIPage,
		Metadata: in.Context.Metadata, Message: in.Prompt,
	}, snap.DefaultAgent)
	if err != nil {
		return RouteResult{}, classify(fmt.Errorf("route: %w", err), agent.ErrTypeAgentNotFound)
	}
	a.Routes.Metrics.Decided(in.TenantID, d.Rule)
	for _, e := range d.Errors {
		a.Logger.Warn("routing rule failed and was skipped", zap.String("tenant", in.TenantID),
			zap.String("rule", e.Rule), zap.String("error", e.Err))
	}
	return RouteResult{AgentID: d.AgentID, Rule: d.Rule, CatalogVersion: snap.Version, RuleErrors: d.Errors}, nil
}

// LoadAgentInput names the turn and the agent it will run.
type LoadAgentInput struct {
	Request    agent.TurnRequest `json:"request"`
	WorkflowID string            `json:"workflow_id"`
	AgentID    string            `json:"agent_id"`
}

// LoadAgentResult is the pinned agent version, or the stored result of an
// earlier run of the same job.
type LoadAgentResult struct {
	Agent    agent.Agent       `json:"agent"`
	Existing *agent.TurnResult `json:"existing,omitempty"`
}

// LoadAgent resolves the agent's active version and pins it for the turn
// (the result is recorded in the workflow's history, so replay sees the
// same configuration whatever happens to the catalog later). It records
// the turn and its prompt (step 0). When the job already has a stored
// result it returns that instead, so a job id always has one result.
func (a *Activities) LoadAgent(ctx context.Context, in LoadAgentInput) (LoadAgentResult, error) {
	req := in.Request
	existing, err := a.Store.Result(ctx, req.TenantID, req.JobID)
	switch {
	case err == nil:
		return LoadAgentResult{Existing: &existing}, nil
	case !agent.IsCode(err, agent.CodeNotFound):
		return LoadAgentResult{}, fmt.Errorf("look up result of job %q: %w", req.JobID, err)
	}

	ag, err := a.Store.ActiveAgent(ctx, req.TenantID, in.AgentID)
	if err != nil {
		return LoadAgentResult{}, classify(fmt.Errorf("load agent %q: %w", in.AgentID, err), agent.ErrTypeAgentNotFound)
	}
	err = a.Store.BeginTurn(ctx, store.Turn{
		TenantID:     req.TenantID,
		JobID:        req.JobID,
		WorkflowID:   in.WorkflowID,
		AgentID:      ag.ID,
		AgentVersion: ag.Version,
		SessionID:    req.SessionID,
		Request:      req,

		TurnsPerMinute: ag.Limits.TurnsPerMinute,
	})
	if agent.IsCode(err, agent.CodeLimit) {
		return LoadAgentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), agent.ErrTypeRateLimited, nil)
	}
	if err != nil {
		return LoadAgentResult{}, classify(fmt.Errorf("begin turn: %w", err), agent.ErrTypeInvalidRequest)
	}
	if err := a.Store.PutStep(ctx, req.TenantID, req.JobID, 0, agent.Message{Role: agent.RoleUser, Content: req.Prompt}); err != nil {
		return LoadAgentResult{}, fmt.Errorf("store prompt: %w", err)
	}
	return LoadAgentResult{Agent: ag}, nil
}

// SaveResultInput is a finished turn's result.
type SaveResultInput struct {
	Request    agent.TurnRequest `json:"request"`
	WorkflowID string            `json:"workflow_id"`
	Result     agent.TurnResult  `json:"result"`
}

// SaveResult stores the result (first write wins) and, for a completed
// turn in a session, appends the exchange to the session's transcript. It
// returns the stored result, with its result_ref.
func (a *Activities) SaveResult(ctx context.Context, in SaveResultInput) (agent.TurnResult, error) {
	req := in.Request
	stored, err := a.Store.SaveResult(ctx, req.TenantID, in.WorkflowID, in.Result, req)
	if err != nil {
		return agent.TurnResult{}, classify(fmt.Errorf("save result of job %q: %w", req.JobID, err), agent.ErrTypeInternal)
	}
	if req.SessionID != "" && stored.Status == agent.StatusCompleted {
		msgs := []agent.Message{
			{Role: agent.RoleUser, Content: req.Prompt},
			{Role: agent.RoleAssistant, Content: stored.Output},
		}
		if err := a.Store.AppendSession(ctx, req.TenantID, req.SessionID, req.JobID, msgs); err != nil {
			return agent.TurnResult{}, fmt.Errorf("append to session %q: %w", req.SessionID, err)
		}
	}
	// The turn logs its terminal event next, in the same workflow task.
	a.wake(ctx, in.WorkflowID)
	return stored, nil
}
