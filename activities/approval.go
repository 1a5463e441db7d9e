package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/policy"
	"github.com/agentflow/agentflow/internal/store"
)

// RecordApproval stores a decision on a tool call (who, when, why). The
// first record of a call stands, so a retry is harmless.
func (a *Activities) RecordApproval(ctx context.Context, r agent.ApprovalRecord) error {
	if err := a.store.RecordApproval(ctx, r); err != nil {
		return fmt.Errorf("record approval of call %q: %w", r.CallID, err)
	}
	return nil
}

// approvals applies the agent's tools' approval policies to the calls,
// as the tool registry says each call's policy is (tools.Registry.Approval),
// and names the grant that decides each call whose policy asks for a
// person, if one does (grantsFor). A call of a tool the agent does not
// have needs none: it fails anyway.
func (a *Activities) approvals(ctx context.Context, ag agent.Agent, in contract.CallModelInput, calls []agent.ToolCall) []contract.ApprovalNeed {
	var out []contract.ApprovalNeed
	for _, c := range calls {
		t, ok := ag.Tool(c.Name)
		if !ok {
			continue
		}
		if need, why := a.needsApproval(t, json.RawMessage(c.Arguments), in); need {
			out = append(out, contract.ApprovalNeed{CallID: c.ID, Reason: why})
		}
	}
	if len(out) > 0 {
		a.grantsFor(ctx, ag, in, calls, out)
	}
	return out
}

// grantsFor sets on each need the oldest active grant that covers its
// call (agent.Grant.Covers): an approval remembered for the turn or the
// session, which the turn takes as the call's decision. Grants that
// cannot be read decide nothing: the calls wait for a person.
func (a *Activities) grantsFor(ctx context.Context, ag agent.Agent, in contract.CallModelInput, calls []agent.ToolCall, needs []contract.ApprovalNeed) {
	byID := make(map[string]agent.ToolCall, len(calls))
	var tools []string
	for _, c := range calls {
		byID[c.ID] = c
		if !slices.Contains(tools, c.Name) {
			tools = append(tools, c.Name)
		}
	}
	now := time.Now()
	grants, err := a.store.ActiveGrants(ctx, store.GrantQuery{TenantID: in.TenantID, AgentID: ag.ID, SessionID: in.SessionID,
		JobID: in.JobID, Tools: tools}, now)
	if err != nil {
		a.log(ctx).Warn("grants not read; the calls wait for a person", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID), zap.Error(err))
		return
	}
	for i, n := range needs {
		c := byID[n.CallID]
		call := agent.GrantedCall{TenantID: in.TenantID, SessionID: in.SessionID, JobID: in.JobID, AgentID: ag.ID, Tool: c.Name,
			Args: json.RawMessage(c.Arguments)}
		for _, g := range grants {
			if g.Covers(call, now) {
				needs[i].Grant = &g
				break
			}
		}
	}
}

// needsApproval applies a tool's approval policy, as the tool registry
// says it is (tools.Registry.Approval), to a call of it with args.
func (a *Activities) needsApproval(t agent.Tool, args json.RawMessage, in contract.CallModelInput) (bool, string) {
	p, view := a.tools.Approval(t, args)
	return a.policy.NeedsApproval(p, policy.Call{Tool: t.Name, Args: string(view), TenantID: in.TenantID, Caller: in.Caller, Context: in.Context})
}
