package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

const (
	sqlInsertApproval = `
INSERT INTO approvals (tenant_id, job_id, call_id, tool, args, outcome, reason, approver, via, requested_at, decided_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (tenant_id, job_id, call_id) DO NOTHING`

	sqlApprovals = `
SELECT tenant_id, job_id, call_id, tool, args, outcome, reason, approver, via, requested_at, decided_at
FROM approvals WHERE tenant_id = $1 AND job_id = $2 ORDER BY decided_at, call_id`
)

// RecordApproval stores a decision. Idempotent: the first record of a call
// stands, so a retried activity cannot change a decision.
func (s *Store) RecordApproval(ctx context.Context, r agent.ApprovalRecord) error {
	if err := requireJobKey(r.TenantID, r.JobID); err != nil {
		return err
	}
	switch r.Outcome {
	case agent.ApprovalApproved, agent.ApprovalRejected, agent.ApprovalTimedOut, agent.ApprovalCanceled, agent.QuestionAnswered:
	default:
		return agent.Errorf(agent.CodeInvalid, "approval outcome %q: want approved, rejected, timed_out, canceled or answered", r.Outcome)
	}
	if r.CallID == "" || r.Tool == "" {
		return agent.Errorf(agent.CodeInvalid, "approval of job %q: call_id and tool are required", r.JobID)
	}
	var args any
	if len(r.Args) > 0 {
		if !json.Valid(r.Args) {
			return agent.Errorf(agent.CodeInvalid, "approval of call %q: args are not JSON", r.CallID)
		}
		args = r.Args
	}
	if _, err := s.pool.Exec(ctx, sqlInsertApproval, r.TenantID, r.JobID, r.CallID, r.Tool, args, r.Outcome,
		r.Reason, r.Approver, r.Via, r.RequestedAt, r.DecidedAt); err != nil {
		return fmt.Errorf("record approval of call %q: %w", r.CallID, err)
	}
	return nil
}

// Approvals returns a turn's decisions in the order they were made.
func (s *Store) Approvals(ctx context.Context, tenantID, jobID string) ([]agent.ApprovalRecord, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlApprovals, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("load approvals of job %q: %w", jobID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (agent.ApprovalRecord, error) {
		var r agent.ApprovalRecord
		var args []byte
		err := row.Scan(&r.TenantID, &r.JobID, &r.CallID, &r.Tool, &args, &r.Outcome, &r.Reason, &r.Approver, &r.Via,
			&r.RequestedAt, &r.DecidedAt)
		r.Args = args
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("load approvals of job %q: %w", jobID, err)
	}
	return out, nil
}
