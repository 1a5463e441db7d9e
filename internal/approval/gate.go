package approval

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Policies says which policy decides whether a call of a tool needs
// approval, and the arguments to evaluate it over: tools.Registry.Approval,
// which knows each tool kind's floor and how its calls read to a policy.
type Policies interface {
	Approval(spec agent.Tool, args json.RawMessage) (string, json.RawMessage)
}

// Grants reads the grants that may decide calls: store.Store.ActiveGrants.
type Grants interface {
	ActiveGrants(ctx context.Context, q agent.GrantQuery, now time.Time) ([]agent.Grant, error)
}

// Gate decides which of a turn's tool calls wait for a person: the calls
// whose tool's policy asks for one, each with the grant that decides it
// in the person's stead, if one does. The activities ask it about every
// call a model or a program makes, before the turn runs any.
type Gate struct {
	Checker  *Checker
	Policies Policies
	Grants   Grants
}

// Needs applies the agent's tools' approval policies to the calls, as
// Policies says each call's policy is, and names the grant that decides
// each call whose policy asks for a person, if one does (Grant). A call
// of a tool the agent does not have needs none: it fails anyway. When the
// grants cannot be read, Needs returns the needs without grants and the
// error: the calls wait for a person.
func (g Gate) Needs(ctx context.Context, ag agent.Agent, in contract.CallModelInput, calls []agent.ToolCall) ([]contract.ApprovalNeed, error) {
	var out []contract.ApprovalNeed
	for _, c := range calls {
		t, ok := ag.Tool(c.Name)
		if !ok {
			continue
		}
		if need, why := g.NeedsApproval(t, json.RawMessage(c.Arguments), in); need {
			out = append(out, contract.ApprovalNeed{CallID: c.ID, Reason: why})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, g.grant(ctx, ag, in, calls, out)
}

// grant sets on each need the oldest active grant that covers its call
// (agent.Grant.Covers): an approval remembered for the turn or the
// session, which the turn takes as the call's decision.
func (g Gate) grant(ctx context.Context, ag agent.Agent, in contract.CallModelInput, calls []agent.ToolCall, needs []contract.ApprovalNeed) error {
	byID := make(map[string]agent.ToolCall, len(calls))
	var tools []string
	for _, c := range calls {
		byID[c.ID] = c
		if !slices.Contains(tools, c.Name) {
			tools = append(tools, c.Name)
		}
	}
	now := time.Now()
	grants, err := g.Grants.ActiveGrants(ctx, agent.GrantQuery{TenantID: in.TenantID, AgentID: ag.ID, SessionID: in.SessionID,
		JobID: in.JobID, Tools: tools}, now)
	if err != nil {
		return err
	}
	for i, n := range needs {
		c := byID[n.CallID]
		call := agent.GrantedCall{TenantID: in.TenantID, SessionID: in.SessionID, JobID: in.JobID, AgentID: ag.ID, Tool: c.Name,
			Args: json.RawMessage(c.Arguments)}
		for _, gr := range grants {
			if gr.Covers(call, now) {
				needs[i].Grant = &gr
				break
			}
		}
	}
	return nil
}

// NeedsApproval applies a tool's approval policy, as Policies says it
// is, to a call of it with args in the turn in; the reason says why the
// call needs approval ("" when it does not).
func (g Gate) NeedsApproval(t agent.Tool, args json.RawMessage, in contract.CallModelInput) (bool, string) {
	p, view := g.Policies.Approval(t, args)
	return g.Checker.NeedsApproval(p, Call{Tool: t.Name, Args: string(view), TenantID: in.TenantID, Caller: in.Caller, Context: in.Context})
}
