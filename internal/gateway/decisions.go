package gateway

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Decisions a turn waits for: approvals of tool calls (and the grants
// that remember them), and answers to the questions its calls ask.

// Approve implements pb.AgentServiceServer.
func (s *Service) Approve(ctx context.Context, in *pb.ApproveRequest) (*pb.ApproveResponse, error) {
	if in.Approved == nil {
		return nil, s.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "approved is required: true runs the call, false rejects it"))
	}
	match, err := fromPBMatch(in.GetMatch())
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	d := agent.NewApprovalDecision(in.GetCallId(), in.GetApproved(), in.GetReason(), "")
	d.ApprovalID, d.Scope, d.Match, d.ExpiresInSec = in.GetApprovalId(), in.GetScope(), match, int(in.GetExpiresInSec())
	ack, err := s.Decide(ctx, in.GetStreamId(), d)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.ApproveResponse{CallId: ack.CallID, Outcome: ack.Outcome, ApprovalId: ack.ApprovalID, GrantId: ack.GrantID}, nil
}

// Decide sends a decision on a call waiting in a turn of the caller's
// tenant: the one place every door of the gateway decides an approval
// through (the API, WebSocket, the AI SDK, MCP's elicitation). The
// decision is the credential's holder's, whatever the request says, and
// names the call by its approval id (agent.PendingApproval.ApprovalID),
// which binds it to that call: the turn refuses it on any other. Its
// reason gets the tenant's PII redaction, with the turn's placeholders.
func (s *Service) Decide(ctx context.Context, streamID string, d agent.ApprovalDecision) (contract.ApprovalAck, error) {
	if err := OwnStream(ctx, streamID); err != nil {
		return contract.ApprovalAck{}, err
	}
	if d.ApprovalID == "" {
		return contract.ApprovalAck{}, agent.Errorf(agent.CodeInvalid,
			"approval_id is required: the waiting call's, as ListPendingApprovals and its approval_required event give it")
	}
	caller := CallerOf(ctx)
	d.Approver, d.ApproverIssuer, d.ApproverSubject = caller.Name, caller.Issuer, caller.Subject
	if err := d.Validate(); err != nil {
		return contract.ApprovalAck{}, err
	}
	// The reason is stored, and the model reads it when the call is
	// rejected: redacted as an answer is.
	if err := s.redactForTurn(ctx, streamID, &d.Reason); err != nil {
		return contract.ApprovalAck{}, err
	}
	return turnclient.Approve(ctx, s.client, streamID, d)
}

// ListGrants implements pb.AgentServiceServer.
func (s *Service) ListGrants(ctx context.Context, in *pb.ListGrantsRequest) (*pb.ListGrantsResponse, error) {
	f := store.GrantFilter{SessionID: in.GetSessionId(), Inactive: in.GetIncludeInactive(), Now: time.Now()}
	if in.GetSessionId() != "" {
		if err := agent.ValidateID("session_id", in.GetSessionId()); err != nil {
			return nil, s.StatusOf(ctx, err)
		}
	}
	if id := in.GetStreamId(); id != "" {
		if err := OwnStream(ctx, id); err != nil {
			return nil, s.StatusOf(ctx, err)
		}
		f.JobID = strings.TrimPrefix(id, "turn/"+TenantOf(ctx)+"/")
	}
	grants, err := s.store.ListGrants(ctx, TenantOf(ctx), f)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.ListGrantsResponse{Grants: toPBList(grants, toPBGrant)}, nil
}

// RevokeGrant implements pb.AgentServiceServer: revoked by the
// credential's holder, recorded with where its identity comes from.
func (s *Service) RevokeGrant(ctx context.Context, in *pb.RevokeGrantRequest) (*pb.Grant, error) {
	g, err := s.store.RevokeGrant(ctx, TenantOf(ctx), in.GetGrantId(), *CallerOf(ctx).Caller(), time.Now())
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return toPBGrant(g), nil
}

// ListPendingApprovals implements pb.AgentServiceServer.
func (s *Service) ListPendingApprovals(ctx context.Context, in *pb.ListPendingApprovalsRequest) (*pb.ListPendingApprovalsResponse, error) {
	pending, err := ownPending(ctx, s, in.GetStreamId(), turnclient.PendingApprovals)
	if err != nil {
		return nil, err
	}
	return &pb.ListPendingApprovalsResponse{Approvals: toPBList(pending, toPBPending)}, nil
}

// Answer implements pb.AgentServiceServer: the answer is the token
// holder's, with the token's roles, whatever the request says; the turn
// checks them against the question's role.
func (s *Service) Answer(ctx context.Context, in *pb.AnswerRequest) (*pb.AnswerResponse, error) {
	if err := OwnStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	caller := CallerOf(ctx)
	a := caller.AnswerQuestion(in.GetCallId(), in.GetAnswer())
	ack, err := s.AnswerQuestion(ctx, in.GetStreamId(), a)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.AnswerResponse{CallId: ack.CallID, Outcome: ack.Outcome}, nil
}

// answer checks a person's answer to a question of the caller's turn
// streamID, applies the tenant's PII redaction to it as to a prompt (with
// the turn's placeholders: its session's, else its own), and gives it to
// the turn: every door's answers go this way.
func (s *Service) AnswerQuestion(ctx context.Context, streamID string, a agent.Answer) (contract.AnswerAck, error) {
	if err := a.Validate(); err != nil {
		return contract.AnswerAck{}, err
	}
	if err := s.redactForTurn(ctx, streamID, &a.Text); err != nil {
		return contract.AnswerAck{}, err
	}
	return turnclient.Answer(ctx, s.client, streamID, a)
}

// redactForTurn applies the tenant's PII redaction to texts a person
// sends a running turn streamID, with the turn's placeholders: its
// session's, else its own (also for a turn that has not begun yet, whose
// session is not known).
func (s *Service) redactForTurn(ctx context.Context, streamID string, texts ...*string) error {
	tenant, err := agent.StreamTenant(streamID)
	if err != nil {
		return err
	}
	job := strings.TrimPrefix(streamID, contract.TurnWorkflowID(tenant, ""))
	n, err := s.intake().ForTurn(ctx, tenant, job, texts...)
	s.redacted(ctx, tenant, n)
	return err
}

// ListPendingQuestions implements pb.AgentServiceServer.
func (s *Service) ListPendingQuestions(ctx context.Context, in *pb.ListPendingQuestionsRequest) (*pb.ListPendingQuestionsResponse, error) {
	pending, err := ownPending(ctx, s, in.GetStreamId(), turnclient.PendingQuestions)
	if err != nil {
		return nil, err
	}
	return &pb.ListPendingQuestionsResponse{Questions: toPBList(pending, toPBQuestion)}, nil
}

// ownPending reads what a turn of the caller's tenant waits for (read:
// its approvals or its questions); its error is the call's status.
func ownPending[T any](ctx context.Context, s *Service, streamID string, read func(context.Context, client.Client, string) ([]T, error)) ([]T, error) {
	if err := OwnStream(ctx, streamID); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	pending, err := read(ctx, s.client, streamID)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return pending, nil
}
