package nexusdoor

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// Operations beside run_turn.
const (
	OpDecide    = "decide"
	OpAnswer    = "answer"
	OpGetResult = "get_result"
)

// DecideInput decides a call of the binding's tenant's turn job_id that
// waits for approval (the pending approval's call and approval ids). The
// approver is the binding's caller.
type DecideInput struct {
	JobID      string `json:"job_id"`
	CallID     string `json:"call_id"`
	ApprovalID string `json:"approval_id,omitempty"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

// AnswerInput answers a question (ask_user) that a turn of the binding's
// tenant waits on; the answerer is the binding's caller, with its roles,
// which the question's role is checked against.
type AnswerInput struct {
	JobID  string `json:"job_id"`
	CallID string `json:"call_id"`
	Answer string `json:"answer"`
}

// GetResultInput names a turn of the binding's tenant.
type GetResultInput struct {
	JobID string `json:"job_id"`
}

// decide is the sync operation that decides an approval: only with the
// binding's approver role, and only of the binding's tenant's turns
// (the job id is looked up in that tenant).
func (d door) decide() nexus.Operation[json.RawMessage, contract.ApprovalAck] {
	b := d.b
	return nexus.NewSyncOperation(OpDecide, func(ctx context.Context, raw json.RawMessage, _ nexus.StartOperationOptions) (contract.ApprovalAck, error) {
		if !b.may(RoleApprover) {
			return contract.ApprovalAck{}, unauthorized(OpDecide, RoleApprover)
		}
		in, err := decode[DecideInput](OpDecide, raw)
		if err != nil {
			return contract.ApprovalAck{}, err
		}
		if in.JobID == "" || in.CallID == "" {
			return contract.ApprovalAck{}, badRequest(op(OpDecide), "job_id and call_id are needed")
		}
		if _, err := d.o.Intake.ForTurn(ctx, b.TenantID, in.JobID, &in.Reason); err != nil {
			return contract.ApprovalAck{}, handlerError(OpDecide, err)
		}
		c := b.Caller()
		ack, err := turnclient.Approve(ctx, temporalnexus.GetClient(ctx), contract.TurnWorkflowID(b.TenantID, in.JobID), agent.ApprovalDecision{
			CallID: in.CallID, ApprovalID: in.ApprovalID, Approved: in.Approved, Reason: in.Reason,
			Approver: c.Name, ApproverIssuer: c.Issuer, ApproverSubject: c.Subject,
		})
		return ack, handlerError(OpDecide, err)
	})
}

// answer is the sync operation that answers a question of a turn of the
// binding's tenant, as the binding's caller; the answer is redacted by
// the tenant's PII rules, as every door's.
func (d door) answer() nexus.Operation[json.RawMessage, contract.AnswerAck] {
	b := d.b
	return nexus.NewSyncOperation(OpAnswer, func(ctx context.Context, raw json.RawMessage, _ nexus.StartOperationOptions) (contract.AnswerAck, error) {
		if !b.may(RoleUser) {
			return contract.AnswerAck{}, unauthorized(OpAnswer, RoleUser)
		}
		in, err := decode[AnswerInput](OpAnswer, raw)
		if err != nil {
			return contract.AnswerAck{}, err
		}
		c := b.Caller()
		a := agent.Answer{CallID: in.CallID, Text: in.Answer, Answerer: c.Name, Roles: c.Roles, AnswererIssuer: c.Issuer, AnswererSubject: c.Subject}
		if in.JobID == "" {
			return contract.AnswerAck{}, badRequest(op(OpAnswer), "job_id is needed")
		}
		if err := a.Validate(); err != nil {
			return contract.AnswerAck{}, badRequest(op(OpAnswer), err.Error())
		}
		if _, err := d.o.Intake.ForTurn(ctx, b.TenantID, in.JobID, &a.Text); err != nil {
			return contract.AnswerAck{}, handlerError(OpAnswer, err)
		}
		ack, err := turnclient.Answer(ctx, temporalnexus.GetClient(ctx), contract.TurnWorkflowID(b.TenantID, in.JobID), a)
		return ack, handlerError(OpAnswer, err)
	})
}

// getResult is the sync operation that reads a closed turn's result of
// the binding's tenant; a turn still running is a bad request that
// says so (run_turn waits for one).
func (d door) getResult() nexus.Operation[json.RawMessage, agent.TurnResult] {
	b := d.b
	return nexus.NewSyncOperation(OpGetResult, func(ctx context.Context, raw json.RawMessage, _ nexus.StartOperationOptions) (agent.TurnResult, error) {
		if !b.may(RoleUser) {
			return agent.TurnResult{}, unauthorized(OpGetResult, RoleUser)
		}
		in, err := decode[GetResultInput](OpGetResult, raw)
		if err != nil {
			return agent.TurnResult{}, err
		}
		if in.JobID == "" {
			return agent.TurnResult{}, badRequest(op(OpGetResult), "job_id is needed")
		}
		c, id := temporalnexus.GetClient(ctx), contract.TurnWorkflowID(b.TenantID, in.JobID)
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return agent.TurnResult{}, handlerError(OpGetResult, err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return agent.TurnResult{}, badRequest(OpGetResult, "the turn is still running")
		}
		res, err := turnclient.Result(ctx, c.GetWorkflow(ctx, id, ""))
		return res, handlerError(OpGetResult, err)
	})
}

// handlerError is err as the caller reads it: no such turn (or nothing
// waiting) is not found, a refusal of the turn's a bad request, the rest
// the server's to retry.
func handlerError(name string, err error) error {
	if err == nil {
		return nil
	}
	var notFound *serviceerror.NotFound
	var e *agent.Error
	switch {
	case errors.As(err, &notFound) || errors.As(err, &e) && e.Code == agent.CodeNotFound:
		return nexus.HandlerErrorf(nexus.HandlerErrorTypeNotFound, "%s: no such turn of the endpoint's tenant", name)
	case errors.As(err, &e) && (e.Code == agent.CodeInvalid || e.Code == agent.CodeConflict || e.Code == agent.CodePermissionDenied):
		return badRequest(name, e.Message)
	}
	return nexus.HandlerErrorf(nexus.HandlerErrorTypeInternal, "%s: %v", name, err)
}
