package activities

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// maxPrepareQuery bounds a reformulated query.
const maxPrepareQuery = 1000

// Prepare runs one step of the turn's agent's prepare phase: classify and
// reformulate ask the step's model (the agent's by default) about the
// prompt; retrieve searches the tenant's collections and stores what it
// found as the turn's step in.Seq, a system message marked as data (the
// agent's injection guard screens it as it screens tool output), which
// the model reads after the prompt. Retried, retrieve stores its step
// once (a step's first write wins).
func (a *Activities) Prepare(ctx context.Context, in contract.PrepareInput) (contract.PrepareResult, error) {
	ag, err := a.store.AgentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return contract.PrepareResult{}, fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.AgentVersion, agentNotFound(err))
	}
	p := ag.Prepare
	if p == nil {
		return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("the agent has no prepare phase", "InvalidRequest", nil)
	}
	prompt, err := a.store.Step(ctx, in.TenantID, in.JobID, 0)
	if err != nil {
		return contract.PrepareResult{}, fmt.Errorf("load prompt: %w", err)
	}
	switch in.Step {
	case agent.PrepareClassify:
		labels := p.Classify.LabelsOrDefault()
		answer, err := a.ask(ctx, ag, in, p.Classify.ModelOr(ag.Model), "Classify the user's message as exactly one of: "+strings.Join(labels, ", ")+
			". Answer with the label alone.", prompt.Content)
		if err != nil {
			return contract.PrepareResult{}, err
		}
		return contract.PrepareResult{Label: labelOf(answer, labels)}, nil
	case agent.PrepareReformulate:
		answer, err := a.ask(ctx, ag, in, p.Reformulate.ModelOr(ag.Model), "Rewrite the user's message as one standalone search query for a knowledge base. "+
			"Answer with the query alone.", prompt.Content)
		if err != nil {
			return contract.PrepareResult{}, err
		}
		q := words.Clip(strings.TrimSpace(answer), maxPrepareQuery)
		return contract.PrepareResult{Query: cmp.Or(q, prompt.Content)}, nil
	case agent.PrepareRetrieve:
		return a.prepareRetrieve(ctx, ag, in, prompt.Content)
	}
	return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("unknown prepare step "+in.Step, "InvalidRequest", nil)
}

func (a *Activities) prepareRetrieve(ctx context.Context, ag agent.Agent, in contract.PrepareInput, prompt string) (contract.PrepareResult, error) {
	if stored, err := a.store.Step(ctx, in.TenantID, in.JobID, in.Seq); err == nil {
		return contract.PrepareResult{Citations: stored.Citations}, nil // an earlier attempt stored it
	}
	k := a.tools.Deps().Knowledge
	if k == nil {
		return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("this worker has no knowledge store", "Internal", nil)
	}
	query := cmp.Or(in.Query, prompt)
	ctx = withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: prepareKey(in), AgentID: ag.ID, AgentVersion: ag.Version}, nil)
	hits, _, err := k.Retrieve(ctx, in.TenantID, query, *ag.Prepare.Retrieve)
	if err != nil {
		if agent.IsCode(err, agent.CodeInvalid) || agent.IsCode(err, agent.CodeNotFound) {
			return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("prepare: retrieve: "+err.Error(), agent.ErrorCode(err).Class().Type, nil)
		}
		return contract.PrepareResult{}, fmt.Errorf("prepare: retrieve: %w", err)
	}
	content := agent.PrepareContext(query, hits)
	if g := ag.InjectionGuard(); g != nil {
		inj, err := guardpkg.NewInjection(*g)
		if err != nil {
			inj, _ = guardpkg.NewInjection(agent.InjectionGuard{Action: g.Action})
		}
		s := inj.Screen(agent.PrepareRetrieve, "prepare", content)
		countGuard(ctx, in.TenantID, "injection", s.Action, s.Found)
		content = s.Text
	}
	cites := agent.Citations(hits)
	msg := agent.Message{Role: agent.RoleSystem, Content: content, Citations: cites}
	if err := a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, msg); err != nil {
		return contract.PrepareResult{}, fmt.Errorf("store retrieved context: %w", err)
	}
	return contract.PrepareResult{Citations: cites}, nil
}

// ask asks model one short question about text, a call of the turn's
// prepare phase that passes the gates (meteredCall) under the step's
// key: refused with BudgetExceeded when the tenant's budgets are spent.
func (a *Activities) ask(ctx context.Context, ag agent.Agent, in contract.PrepareInput, model, instruction, text string) (string, error) {
	c := metered.Call{TenantID: in.TenantID, Key: prepareKey(in), Kind: store.KindPrepare, AgentID: ag.ID, AgentVersion: ag.Version}
	resp, err := a.meteredCall(ctx, c, llm.Request{Model: model, MaxTokens: 200, Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: instruction}, {Role: agent.RoleUser, Content: text}}})
	if err != nil {
		return "", err
	}
	return resp.Message.Content, nil
}

// prepareKey is the ledger key of a prepare step's model calls: the same
// for each of its attempts.
func prepareKey(in contract.PrepareInput) string {
	return fmt.Sprintf("%s:prepare:%s:%d", in.JobID, in.Step, in.Seq)
}

// labelOf is the label an answer names: the first of labels it holds as
// a word, else the first label.
func labelOf(answer string, labels []string) string {
	words := strings.FieldsFunc(strings.ToLower(answer), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	})
	for _, w := range words {
		if i := slices.IndexFunc(labels, func(l string) bool { return strings.ToLower(l) == w }); i >= 0 {
			return labels[i]
		}
	}
	return labels[0]
}
