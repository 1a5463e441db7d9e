package openai

import (
	"context"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/words"
)

// Approvals on the Responses API, OpenAI's way. A tool call that waits
// for a person's approval is an mcp_approval_request item of its
// response (openai_responses_reply.go), whose id is bound to the call's
// approval. A client decides it with POST /v1/responses, naming the
// response in previous_response_id and answering with input items
// {"type": "mcp_approval_response", "approval_request_id", "approve",
// "reason"?}. The decisions go through the gateway's one approval path
// (Service.Decide): the approver is the credential's holder, who needs
// the approver role as for every other door's approvals.
//
// The turn that goes on is the same turn, so the answer is the same
// response: its id is previous_response_id's (a turn's stream id is its
// one id on every door), followed from its log as GET /v1/responses/{id}
// follows it, whole once the turn ends, streamed from its start, or at
// once, as it is, in the background. Its output holds the approval
// request and what followed it. OpenAI would answer with a new response
// id; a response here is a turn, and a decision starts none.

// decide checks the decisions of req against the approval requests of
// the response it names, then gives each to the turn. An approval request
// the response never asked (or another tenant's response: not found), or
// one already decided, decides nothing: the request fails before any
// decision is given.
func (rs responses) decide(ctx context.Context, req responseRequest) (responseObject, gateway.Turn, error) {
	id := req.PreviousResponseID
	resp, err := rs.open(ctx, id)
	if agent.IsCode(err, agent.CodeNotFound) {
		err = &chatParamError{param: "previous_response_id", err: err}
	}
	var f *responseFold
	if err == nil {
		f, _, err = rs.snapshot(ctx, resp)
	}
	if err == nil && resp.Model != "" && req.chat.Model != resp.Model {
		err = badParam("model", "", "model %q is not the agent of response %q, %s", req.chat.Model, id, resp.Model)
	}
	if err != nil {
		return resp, gateway.Turn{}, err
	}
	decisions := make([]agent.ApprovalDecision, 0, len(req.Approvals))
	for _, a := range req.Approvals {
		asked, ok := f.approvals[a.RequestID]
		switch {
		case !ok:
			return resp, gateway.Turn{}, &chatParamError{param: a.At + ".approval_request_id",
				err: agent.Errorf(agent.CodeNotFound, "response %q has no approval request %q", id, words.Clip(a.RequestID, 64))}
		case asked.decided:
			return resp, gateway.Turn{}, &chatParamError{param: a.At + ".approval_request_id",
				err: agent.Errorf(agent.CodeConflict, "approval request %q of response %q was already decided", a.RequestID, id)}
		case f.ended:
			return resp, gateway.Turn{}, &chatParamError{param: "previous_response_id",
				err: agent.Errorf(agent.CodeConflict, "response %q has ended %s: its approval requests decide nothing", id, f.resp.Status)}
		}
		d := agent.NewApprovalDecision(asked.callID, a.Approve, a.Reason, "")
		d.ApprovalID = asked.approvalID
		decisions = append(decisions, d)
	}
	for _, d := range decisions {
		if _, err := rs.o.s.Decide(ctx, id, d); err != nil {
			return resp, gateway.Turn{}, err
		}
	}
	return resp, gateway.Turn{StreamID: id, Follow: func(ctx context.Context, send func(agent.Event) error) error {
		return rs.o.s.Events().Follow(ctx, id, 0, send)
	}}, nil
}
