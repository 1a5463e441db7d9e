package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// tokenBudget ends the turn once it has used more tokens than its budget
// (the agent's, or the lower one its request set): after a model call,
// and after a tool round, whose delegations spent tokens too. It holds
// no state: what it counts is the core's usage and the tokens of the
// turn's child turns (delegating).
type tokenBudget struct {
	t *turn // the core: its request, agent and usage
}

func (b *tokenBudget) start(_ workflow.Context, t *turn, _ *contract.TurnCarry) error {
	b.t = t
	return nil
}

func (b *tokenBudget) carry(*contract.TurnCarry) error { return nil }

func (b *tokenBudget) afterModel(workflow.Context, int, contract.CallModelResult) *agent.TurnError {
	return b.overBudget()
}

// afterTools: the agents the turn delegated to spent its tokens too.
func (b *tokenBudget) afterTools(workflow.Context) *agent.TurnError {
	return b.overBudget()
}

// overBudget is the turn's failure once it has used more tokens than its
// budget.
func (b *tokenBudget) overBudget() *agent.TurnError {
	t := b.t
	limits := t.agent.Limits.WithDefaults()
	budget := t.req.Budget(limits)
	if budget <= 0 || t.usage.TotalTokens <= budget {
		return nil
	}
	whose := "the agent's budget"
	if budget != limits.TokenBudget {
		whose = "the budget its request set"
	}
	msg := fmt.Sprintf("turn used %d tokens; %s is %d", t.usage.TotalTokens, whose, budget)
	if t.delegatedTokens > 0 {
		msg = fmt.Sprintf("turn used %d tokens (%d of them by the agents it delegated to); %s is %d", t.usage.TotalTokens, t.delegatedTokens, whose, budget)
	}
	return agent.TurnErrorOf(agent.Errorf(agent.CodeTokenBudget, "%s", msg))
}
