package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// toolLimits counts the calls the turn let through its agent's tool
// limits (agent.Agent.ToolLimits), in all and by tool, over all its runs.
type toolLimits struct {
	t           *turn // the core: its agent's limits
	toolCalls   int
	toolsCalled map[string]int
}

func (l *toolLimits) start(_ workflow.Context, t *turn, carried *contract.TurnCarry) error {
	l.t = t
	if carried != nil {
		l.toolCalls, l.toolsCalled = carried.ToolLimitsCarry.ToolCalls, carried.ToolLimitsCarry.ToolsCalled
	}
	return nil
}

func (l *toolLimits) carry(c *contract.TurnCarry) error {
	c.ToolLimitsCarry = contract.ToolLimitsCarry{ToolCalls: l.toolCalls, ToolsCalled: l.toolsCalled}
	return nil
}

// refuse refuses a call past the agent's tool limits.
func (l *toolLimits) refuse(c agent.ToolCall) string {
	return l.overToolLimit(l.t.agent.ToolLimits(), c)
}

// overToolLimit says why call c is not run when it would take the turn
// past its agent's tool limits (lim), and counts it when it
// is not; "" for a call within them.
func (l *toolLimits) overToolLimit(lim *agent.ToolLimits, c agent.ToolCall) string {
	if lim == nil {
		return ""
	}
	if lim.PerTurn > 0 && l.toolCalls >= lim.PerTurn {
		return fmt.Sprintf("the call was not run: this agent makes at most %d tool calls a turn, and has made them; answer with what you have", lim.PerTurn)
	}
	if n, ok := lim.PerTool[c.Name]; ok && l.toolsCalled[c.Name] >= n {
		return fmt.Sprintf("the call was not run: %s may be called at most %d times a turn, and has been; answer with what you have", c.Name, n)
	}
	if l.toolsCalled == nil {
		l.toolsCalled = map[string]int{}
	}
	l.toolCalls++
	l.toolsCalled[c.Name]++
	return ""
}
