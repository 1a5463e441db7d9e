package a2a

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// A task whose call waits for approval is input-required, on both
// versions of the door; the A2A way to give input is a message for the
// task, so such a message decides the call, as the approvals API and
// MCP's elicitation do (gateway.Service.Decide: the decision is the token's
// holder's, bound to the call by its approval id), when the token has the
// approver role. Without it the call waits for an approver, as any
// turn's. The decision is a data part {"approved": true|false,
// "reason"?: "…"}, or the text "approve" or "reject"; the call is the one
// the message's metadata names ("call_id"), else the first that waits.

// a2aDecision is what a message decides.
type a2aDecision struct {
	approved bool
	reason   string
}

// a2aDecisionOf reads a decision from a message's data parts: the first
// with a boolean "approved".
func a2aDecisionOf(msg *a2a.Message) (a2aDecision, bool) {
	if msg == nil {
		return a2aDecision{}, false
	}
	for _, p := range msg.Parts {
		var data map[string]any
		switch p := p.(type) {
		case a2a.DataPart:
			data = p.Data
		case *a2a.DataPart:
			data = p.Data
		}
		if approved, ok := data["approved"].(bool); ok {
			reason, _ := data["reason"].(string)
			return a2aDecision{approved: approved, reason: reason}, true
		}
	}
	return a2aDecision{}, false
}

// a2aDecisionWords are the texts that decide a call, and how.
var a2aDecisionWords = map[string]bool{"approve": true, "approved": true, "reject": false, "rejected": false}

// decideTask decides the call of task in.taskID that waits for approval,
// as the message says (decision, when decides; else its text).
func (m *a2aServer) decideTask(ctx context.Context, in a2aInput, decision a2aDecision, decides bool) error {
	calls, err := turnclient.PendingApprovals(ctx, m.s.Client(), in.taskID)
	if err != nil {
		return m.fail(ctx, err, a2a.ErrTaskNotFound)
	}
	if len(calls) == 0 {
		return fmt.Errorf("task %s waits for no input now: a task takes more input only to answer its question "+
			"or decide its call that waits for approval: %w", in.taskID, a2a.ErrInvalidRequest)
	}
	call := calls[0]
	if in.callID != "" {
		i := 0
		for i < len(calls) && calls[i].CallID != in.callID {
			i++
		}
		if i == len(calls) {
			return fmt.Errorf("task %s has no call %s waiting for approval: %w", in.taskID, gateway.Clip(in.callID), a2a.ErrInvalidParams)
		}
		call = calls[i]
	}
	if !decides {
		approved, ok := a2aDecisionWords[strings.ToLower(strings.TrimSpace(in.prompt))]
		if !ok {
			return fmt.Errorf("task %s waits for a decision on the call %s of the tool %s: send a data part "+
				`{"approved": true|false, "reason": "…"}, or the text approve or reject: %w`, in.taskID, call.CallID, call.Tool, a2a.ErrInvalidParams)
		}
		decision = a2aDecision{approved: approved}
	}
	if !gateway.CallerOf(ctx).Has(gateway.RoleApprover) {
		return fmt.Errorf("the call %s of task %s waits for a person with the approver role, which this token does not have: "+
			"an approver decides it (a message for the task, or the approvals API): %w", call.CallID, in.taskID, a2a.ErrInvalidRequest)
	}
	d := agent.NewApprovalDecision(call.CallID, decision.approved, decision.reason, "")
	d.ApprovalID = call.ApprovalID
	if _, err := m.s.Decide(ctx, in.taskID, d); err != nil {
		return m.fail(ctx, err, a2a.ErrInvalidParams)
	}
	return nil
}
