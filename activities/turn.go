package activities

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/words"
)

// Route picks the agent for a request: the one it names, else the first
// of the tenant's routing rules that matches, else the tenant's default.
// It reads the tenant's cached settings, its rules compiled, so it runs as
// a local activity.
func (a *Activities) Route(ctx context.Context, in contract.RouteInput) (contract.RouteResult, error) {
	if in.AgentID != "" {
		traceRoute(ctx, in.TenantID, contract.RouteResult{AgentID: in.AgentID, Rule: contract.RuleExplicit})
		return contract.RouteResult{AgentID: in.AgentID, Rule: contract.RuleExplicit}, nil
	}
	settings, err := a.tenants.Settings(ctx, in.TenantID)
	if err != nil {
		return contract.RouteResult{}, fmt.Errorf("route: %w", agentNotFound(err))
	}
	d, err := settings.Table.Route(routing.Input{
		TenantID: in.TenantID, Caller: in.Caller, UserRole: in.Context.UserRole, UIPage: in.Context.UIPage,
		Metadata: in.Context.Metadata, Message: in.Prompt,
	}, settings.DefaultAgent)
	if err != nil {
		return contract.RouteResult{}, fmt.Errorf("route: %w", agentNotFound(err))
	}
	a.tenants.Metrics.Decided(in.TenantID, d.Rule)
	traceRoute(ctx, in.TenantID, contract.RouteResult{AgentID: d.AgentID, Rule: d.Rule})
	for _, e := range d.Errors {
		a.log(ctx).Warn("routing rule failed and was skipped", zap.String("tenant", in.TenantID),
			zap.String("rule", e.Rule), zap.String("error", e.Err))
	}
	return contract.RouteResult{AgentID: d.AgentID, Rule: d.Rule, CatalogVersion: settings.Version, RuleErrors: d.Errors}, nil
}

// LoadAgent resolves the agent's active version and pins it for the turn
// (the result is recorded in the workflow's history, so replay sees the
// same configuration whatever happens to the catalog later). It records
// the turn and its prompt (step 0). When the job already has a stored
// result it returns that instead, so a job id always has one result.
//
// A job id names one request: when the job's stored result, or the claim
// of a turn begun under it, is another request's (agent.TurnRequest.Hash),
// it fails with agent.CodeConflict and the turn is rejected, storing
// nothing — whoever started it (the gateway, the temporal CLI, a parent
// workflow) and under whatever workflow id. The worker's TurnStart hooks
// see the turn before it is recorded, and may reject it.
func (a *Activities) LoadAgent(ctx context.Context, in contract.LoadAgentInput) (contract.LoadAgentResult, error) {
	req := in.Request
	// The gateway compiles a request's output schema before it starts the
	// turn; a turn started through Temporal directly has it compiled here,
	// before anything is stored or sent to a model.
	if _, err := structured.Compile(req.OutputSchema); err != nil {
		return contract.LoadAgentResult{}, err
	}
	ag, existing, err := a.store.TurnStart(ctx, req, in.AgentID)
	switch {
	case agent.IsCode(err, agent.CodeConflict):
		return contract.LoadAgentResult{}, err
	case err != nil:
		return contract.LoadAgentResult{}, fmt.Errorf("load agent %q: %w", in.AgentID, agentNotFound(err))
	case existing != nil:
		return contract.LoadAgentResult{Existing: existing}, nil
	}
	if v := req.AgentVersion; v > 0 && v != ag.Version {
		// The request pins another version than the active one.
		if ag, err = a.store.AgentVersion(ctx, req.TenantID, in.AgentID, v); err != nil {
			return contract.LoadAgentResult{}, fmt.Errorf("load agent %q version %d: %w", in.AgentID, v, agentNotFound(err))
		}
	}
	// A model the agent does not let a turn choose is refused before the
	// turn counts against the agent's rate or stores anything.
	if err := ag.CheckModel(req.Model); err != nil {
		return contract.LoadAgentResult{}, err
	}
	// So is a deliver target the agent lacks: the turn fails at once,
	// rather than answering and finding at its end that it cannot deliver.
	if err := ag.CheckDeliver(req); err != nil {
		return contract.LoadAgentResult{}, err
	}
	parts, err := a.resolveParts(ctx, req.TenantID, req.Parts)
	if err != nil {
		return contract.LoadAgentResult{}, err
	}
	prompt := &agent.Message{Role: agent.RoleUser, Content: req.Prompt, Parts: parts}
	// The worker's hooks see the turn before it is recorded: one that
	// refuses it rejects it with nothing stored, as any rejected request.
	if err := a.hooks.TurnStart(ctx, &hooks.TurnBegin{
		TenantID: req.TenantID, AgentID: ag.ID, JobID: req.JobID, SessionID: req.SessionID,
		AgentVersion: ag.Version, Caller: req.Caller,
		Prompt: agent.Message{Role: agent.RoleUser, Content: req.Prompt, Parts: slices.Clone(parts)},
	}); err != nil {
		return contract.LoadAgentResult{}, err
	}
	// The version as its model receives it: its artefact read, or
	// compiled and stored when missing (compiled.go).
	_, compiled := a.compiledAgent(ctx, ag, true)
	err = a.store.BeginTurn(ctx, store.Turn{
		TenantID:     req.TenantID,
		JobID:        req.JobID,
		WorkflowID:   in.WorkflowID,
		AgentID:      ag.ID,
		AgentVersion: ag.Version,
		SessionID:    req.SessionID,
		Request:      req,

		TurnsPerMinute: ag.Limits.TurnsPerMinute,
		Prompt:         prompt,
		CompiledRef:    compiled,
	})
	if agent.IsCode(err, agent.CodeConflict) {
		return contract.LoadAgentResult{}, err // its message is the caller's
	}
	if err != nil {
		return contract.LoadAgentResult{}, fmt.Errorf("begin turn: %w", err)
	}
	// The turn pins the model timeout it runs with: the agent's, under
	// the operator's limit.
	ag.Limits = ag.Limits.CapModelTimeout(a.maxModelTimeout)
	ag = ag.CapToolTimeouts(a.maxToolTimeout)
	return contract.LoadAgentResult{Agent: ag.ForTurn(), Compiled: compiled, ObserveEvents: a.hooks.Events()}, nil
}

// resultBlocks are a completed result's content blocks: the reasoning,
// the files, the JSON answer and the text, each when there is one.
func resultBlocks(res agent.TurnResult, reasoning string, files []agent.Block) []agent.Block {
	var blocks []agent.Block
	if reasoning != "" {
		blocks = append(blocks, agent.Block{Type: agent.BlockReasoning, Text: words.Clip(reasoning, agent.MaxResultReasoningBytes)})
	}
	blocks = append(blocks, files...)
	if len(res.OutputJSON) > 0 {
		blocks = append(blocks, agent.Block{Type: agent.BlockJSON, JSON: res.OutputJSON})
	}
	if res.Output != "" {
		blocks = append(blocks, agent.Block{Type: agent.BlockText, Text: res.Output})
	}
	return blocks
}

// cutAnswers reads the answers the turn's steered messages cut short
// (SaveResultInput.CutAt), by the message's place in Steered: each as
// the turn stored it, partial.
func (a *Activities) cutAnswers(ctx context.Context, req agent.TurnRequest, at []int) (map[int]agent.Message, error) {
	out := map[int]agent.Message{}
	for i, seq := range at {
		if seq <= 0 {
			continue
		}
		steps, err := a.store.StepsBetween(ctx, req.TenantID, req.JobID, seq, seq+1)
		if err != nil {
			return nil, fmt.Errorf("load the answer cut short of job %q: %w", req.JobID, err)
		}
		if len(steps) == 1 && steps[0].Role == agent.RoleAssistant {
			out[i] = agent.Message{Role: agent.RoleAssistant, Content: steps[0].Content, Partial: steps[0].Partial}
		}
	}
	return out, nil
}

// SaveResult stores the results of tool calls that did not run, then the
// turn's result (first write wins) and, for a completed turn in a
// session, or one stopped in its answer (agent.TurnResult.Partial),
// appends the exchange to the session's transcript; then it closes or
// marks the session as the request's session_end says. It returns the
// stored result, with its result_ref.
func (a *Activities) SaveResult(ctx context.Context, in contract.SaveResultInput) (agent.TurnResult, error) {
	req := in.Request
	if err := a.storeToolFailures(ctx, req.TenantID, req.JobID, in.ToolFailures); err != nil {
		return agent.TurnResult{}, err
	}
	res := in.Result
	switch {
	case res.Status == agent.StatusCompleted:
		res.Blocks = resultBlocks(res, in.Reasoning, in.Files)
		res.Citations = agent.Cited(res.Output, in.Retrieved)
		res.Blocks = append(res.Blocks, agent.CitationBlocks(res.Citations)...)
	case res.Partial:
		res.Blocks = []agent.Block{{Type: agent.BlockText, Text: res.Output, Partial: true}}
	}
	stored, err := a.store.SaveResult(ctx, req.TenantID, in.WorkflowID, res, req)
	if err != nil {
		return agent.TurnResult{}, fmt.Errorf("save result of job %q: %w", req.JobID, err)
	}
	a.hooks.TurnEnd(ctx, &hooks.Turn{TenantID: req.TenantID, AgentID: stored.Metadata.AgentID, Result: stored})
	// The live path is emptied while the rest is done, and before the
	// close is published (forgetLive).
	forgot := a.forgetLive(ctx, req, in.WorkflowID)
	defer func() { <-forgot }()
	if req.SessionID != "" && (stored.Status == agent.StatusCompleted || stored.Partial) {
		// The prompt's parts as the turn kept them (by cas:// ref), so
		// that later turns of the session show the model the same images.
		prompt := agent.Message{Role: agent.RoleUser, Content: req.Prompt}
		if len(req.Parts) > 0 {
			steps, err := a.store.Steps(ctx, req.TenantID, req.JobID)
			if err != nil {
				return agent.TurnResult{}, fmt.Errorf("load prompt of job %q: %w", req.JobID, err)
			}
			if len(steps) > 0 {
				prompt.Parts = steps[0].Parts
			}
		}
		msgs := []agent.Message{prompt}
		cut, err := a.cutAnswers(ctx, req, in.CutAt)
		if err != nil {
			return agent.TurnResult{}, err
		}
		for i, p := range in.Steered {
			if c, ok := cut[i]; ok {
				msgs = append(msgs, c)
			}
			msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: p})
		}
		msgs = append(msgs, agent.Message{Role: agent.RoleAssistant, Content: stored.Output, Partial: stored.Partial})
		if err := a.store.AppendSession(ctx, req.TenantID, req.SessionID, req.JobID, msgs); err != nil {
			return agent.TurnResult{}, fmt.Errorf("append to session %q: %w", req.SessionID, err)
		}
	}
	if req.SessionEnd != "" {
		// After its messages, so that a marked session's last exchange is
		// this turn's; whatever the turn's status, as its run has ended.
		if err := a.store.EndSession(ctx, req.TenantID, req.SessionID, req.JobID, req.SessionEnd); err != nil {
			return agent.TurnResult{}, err
		}
	}
	if err := a.startDelivery(ctx, in, stored); err != nil {
		return agent.TurnResult{}, err
	}
	// The result is stored and the session holds the exchange: followers
	// may end now. The turn logs these events next, as they are.
	if err := <-forgot; err == nil {
		stored.StreamTail = a.sinks(ctx, "").Close(ctx, in.WorkflowID, in.Live, in.CloseFrom, stored)
	}
	return stored, nil
}

// forgetLive drops what the turn's calls streamed live first (the log
// holds it) from the live path, in the background; the channel gives the
// outcome and is closed (nil when there was nothing to drop). SaveResult publishes
// the turn's close only after it, and only when it succeeded: a follower
// shown the close may read the turn at once, and while the workflow task
// that took the result still runs, the read answers from the live path
// (eventlog.Follower.Read), which must then hold nothing rather than the
// turn's events without their end. Without the close published,
// followers have it from the log.
func (a *Activities) forgetLive(ctx context.Context, req agent.TurnRequest, workflowID string) <-chan error {
	forgot := make(chan error, 1)
	ap, ok := a.events.(eventlog.Appender)
	if !ok || !req.Streaming() {
		close(forgot)
		return forgot
	}
	go func() {
		err := ap.Forget(ctx, workflowID)
		if err != nil {
			a.log(ctx).Warn("forget streamed batches", zap.String("workflow_id", workflowID), zap.Error(err))
		}
		forgot <- err
		close(forgot) // a second receive (the deferred wait) returns at once
	}()
	return forgot
}
