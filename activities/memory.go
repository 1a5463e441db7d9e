package activities

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/memory"
	"github.com/agentflow/agentflow/internal/store"
)

// Summarize folds the older messages of a session's transcript into its
// summary once what the model would read after the summary has outgrown
// the agent's memory window: the latest messages that fill half the
// window stay as they are, the ones before them go into the summary,
// rewritten with them by a model call of its own (the agent's
// summary_model, else its model), which the usage ledger counts. A
// transcript that still fits is left alone. Retries are harmless: the
// summary only ever advances (store.PutSummary).
func (a *Activities) Summarize(ctx context.Context, in contract.SummarizeInput) (contract.SummarizeResult, error) {
	settings, err := a.tenants.Settings(ctx, in.TenantID)
	if err != nil {
		return contract.SummarizeResult{}, err
	}
	agentID := in.AgentID
	agentID = cmp.Or(agentID, settings.DefaultAgent)
	if agentID == "" {
		return contract.SummarizeResult{}, nil // nothing to take the memory's settings from
	}
	ag, err := a.store.ActiveAgent(ctx, in.TenantID, agentID)
	if err != nil {
		return contract.SummarizeResult{}, fmt.Errorf("load agent %q: %w", agentID, agentNotFound(err))
	}
	mem, err := a.store.SessionMemory(ctx, in.TenantID, in.SessionID, memory.SummarizeRead)
	if err != nil {
		return contract.SummarizeResult{}, err
	}
	fold := memory.Fold(sessionMessages(mem.Recent), ag.Memory.Window())
	if len(fold) == 0 {
		return contract.SummarizeResult{Through: mem.SummarySeq}, nil
	}
	model := ag.Model
	if ag.Memory.SummaryModel != "" {
		model = ag.Memory.SummaryModel
	}
	resp, err := a.model.Generate(ctx, llm.Request{
		Model:     model,
		Messages:  []agent.Message{{Role: agent.RoleSystem, Content: memory.SummarizerPrompt}, {Role: agent.RoleUser, Content: memory.FoldPrompt(mem.Summary, fold)}},
		MaxTokens: memory.SummaryMaxTokens,
	})
	if err != nil {
		return contract.SummarizeResult{}, modelError(err)
	}
	through := mem.Recent[len(fold)-1].Seq
	call := store.ModelCall{TenantID: in.TenantID, JobID: fmt.Sprintf("summary:%s:%d", in.SessionID, through), Attempt: int(activity.GetInfo(ctx).Attempt),
		AgentID: ag.ID, AgentVersion: ag.Version, SessionID: in.SessionID, Model: model, Usage: resp.Usage}
	if p, ok := agent.PriceOf(settings.Billing.Prices, model); ok {
		cost := p.Cost(resp.Usage)
		call.Cost = &cost
	}
	if _, err := a.store.PutSummary(ctx, store.Summary{Text: strings.TrimSpace(resp.Message.Content), Through: through, Call: call}); err != nil {
		return contract.SummarizeResult{}, err
	}
	return contract.SummarizeResult{Through: through, Folded: len(fold)}, nil
}

// AgentOnBusy reads what a message to a conversation does, by its agent's
// catalog, when it arrives while a turn runs (agent.Agent.OnBusy). An
// agent that does not exist has no say: its turns will say what is wrong.
func (a *Activities) AgentOnBusy(ctx context.Context, in contract.AgentOnBusyInput) (contract.AgentOnBusyResult, error) {
	agentID := in.AgentID
	if agentID == "" {
		settings, err := a.tenants.Settings(ctx, in.TenantID)
		if err != nil {
			return contract.AgentOnBusyResult{}, err
		}
		agentID = settings.DefaultAgent
	}
	if agentID == "" {
		return contract.AgentOnBusyResult{}, nil
	}
	var ag agent.Agent
	var err error
	if in.AgentVersion > 0 {
		ag, err = a.store.AgentVersion(ctx, in.TenantID, agentID, in.AgentVersion)
	} else {
		ag, err = a.store.ActiveAgent(ctx, in.TenantID, agentID)
	}
	if agent.IsCode(err, agent.CodeNotFound) {
		return contract.AgentOnBusyResult{AgentID: agentID}, nil
	}
	if err != nil {
		return contract.AgentOnBusyResult{}, err
	}
	return contract.AgentOnBusyResult{AgentID: agentID, OnBusy: ag.OnBusy}, nil
}
