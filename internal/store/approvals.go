package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

const (
	sqlInsertApproval = `
INSERT INTO approvals (tenant_id, job_id, call_id, tool, args, outcome, reason, approver, via, requested_at, decided_at,
                       approval_id, approver_issuer, approver_subject, grant_id, resend)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
ON CONFLICT (tenant_id, job_id, call_id, approval_id) DO NOTHING`

	sqlApprovals = `
SELECT tenant_id, job_id, call_id, tool, args, outcome, reason, approver, via, requested_at, decided_at,
       approval_id, approver_issuer, approver_subject, grant_id, resend
FROM approvals WHERE tenant_id = $1 AND job_id = $2 ORDER BY decided_at, call_id, approval_id`

	sqlInsertApprovalGrant = `
INSERT INTO approval_grants (tenant_id, grant_id, scope, session_id, job_id, agent_id, tool, match, call_id, approval_id,
                             approver, approver_issuer, approver_subject, reason, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
ON CONFLICT (tenant_id, grant_id) DO NOTHING`

	grantColumns = `tenant_id, grant_id, scope, session_id, job_id, agent_id, tool, match, call_id, approval_id,
       approver, approver_issuer, approver_subject, reason, created_at, expires_at,
       revoked_at, revoked_by, revoked_by_issuer, revoked_by_subject`

	// The grants that may decide a call of one of tools by agent in turn
	// job of session: active at $6, of the session (scope session) or of
	// the turn (scope turn). Their matches are checked in Go
	// (agent.Grant.Covers), as everywhere.
	sqlActiveGrants = `
SELECT ` + grantColumns + `
FROM approval_grants
WHERE tenant_id = $1 AND agent_id = $2 AND tool = ANY($3) AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > $6)
  AND ((scope = 'session' AND session_id = $4 AND $4 <> '') OR (scope = 'turn' AND job_id = $5))
ORDER BY created_at, grant_id`

	sqlListGrants = `
SELECT ` + grantColumns + `
FROM approval_grants
WHERE tenant_id = $1 AND ($2 = '' OR session_id = $2) AND ($3 = '' OR job_id = $3)
  AND ($4 OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $5)))
ORDER BY created_at, grant_id
LIMIT $6`

	sqlGrant = `SELECT ` + grantColumns + ` FROM approval_grants WHERE tenant_id = $1 AND grant_id = $2`

	sqlRevokeGrant = `
UPDATE approval_grants SET revoked_at = $3, revoked_by = $4, revoked_by_issuer = $5, revoked_by_subject = $6
WHERE tenant_id = $1 AND grant_id = $2 AND revoked_at IS NULL
RETURNING ` + grantColumns
)

// RecordApproval stores a decision, and the grant it makes (r.Grant), in
// one transaction. Idempotent: the first record of a waiting call (its
// approval id) stands, and so does a grant's, so a retried activity
// cannot change a decision.
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
	if g := r.Grant; g != nil {
		if err := checkGrant(*g, r); err != nil {
			return err
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlInsertApproval, r.TenantID, r.JobID, r.CallID, r.Tool, args, r.Outcome,
			r.Reason, r.Approver, r.Via, r.RequestedAt, r.DecidedAt, r.ApprovalID, r.ApproverIssuer, r.ApproverSubject, r.GrantID, r.Resend); err != nil {
			return err
		}
		g := r.Grant
		if g == nil {
			return nil
		}
		match, err := json.Marshal(matchOrEmpty(g.Match))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, sqlInsertApprovalGrant, g.TenantID, g.ID, g.Scope, g.SessionID, g.JobID, g.AgentID, g.Tool, match,
			g.CallID, g.ApprovalID, g.Approver, g.ApproverIssuer, g.ApproverSubject, g.Reason, g.CreatedAt, g.ExpiresAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("record approval of call %q: %w", r.CallID, err)
	}
	return nil
}

// checkGrant refuses a grant that is not the record's own: of another
// tenant, turn, call or tool, or of a scope that remembers nothing.
func checkGrant(g agent.Grant, r agent.ApprovalRecord) error {
	switch {
	case g.TenantID != r.TenantID || g.JobID != r.JobID || g.CallID != r.CallID || g.Tool != r.Tool || g.ID != r.GrantID:
		return agent.Errorf(agent.CodeInvalid, "grant %q is not the one the approval of call %q makes", g.ID, r.CallID)
	case r.Outcome != agent.ApprovalApproved:
		return agent.Errorf(agent.CodeInvalid, "grant %q: only an approval makes a grant", g.ID)
	case g.Scope != agent.ScopeTurn && g.Scope != agent.ScopeSession:
		return agent.Errorf(agent.CodeInvalid, "grant %q: scope %q: want turn or session", g.ID, g.Scope)
	case g.Scope == agent.ScopeSession && g.SessionID == "":
		return agent.Errorf(agent.CodeInvalid, "grant %q: scope session without a session", g.ID)
	case g.ID == "" || g.AgentID == "" || g.ApprovalID == "":
		return agent.Errorf(agent.CodeInvalid, "grant of call %q: id, agent_id and approval_id are required", g.CallID)
	}
	return g.Match.Validate()
}

func matchOrEmpty(m agent.ArgsMatch) agent.ArgsMatch {
	if m == nil {
		return agent.ArgsMatch{}
	}
	return m
}

// Approvals returns a turn's decisions in the order they were made.
func (s *Store) Approvals(ctx context.Context, tenantID, jobID string) ([]agent.ApprovalRecord, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.ApprovalRecord, error) {
		var r agent.ApprovalRecord
		var args []byte
		err := row.Scan(&r.TenantID, &r.JobID, &r.CallID, &r.Tool, &args, &r.Outcome, &r.Reason, &r.Approver, &r.Via,
			&r.RequestedAt, &r.DecidedAt, &r.ApprovalID, &r.ApproverIssuer, &r.ApproverSubject, &r.GrantID, &r.Resend)
		r.Args = args
		return r, err
	}, sqlApprovals, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("load approvals of job %q: %w", jobID, err)
	}
	return out, nil
}

func scanGrant(row pgx.CollectableRow) (agent.Grant, error) {
	var g agent.Grant
	var match []byte
	err := row.Scan(&g.TenantID, &g.ID, &g.Scope, &g.SessionID, &g.JobID, &g.AgentID, &g.Tool, &match, &g.CallID, &g.ApprovalID,
		&g.Approver, &g.ApproverIssuer, &g.ApproverSubject, &g.Reason, &g.CreatedAt, &g.ExpiresAt,
		&g.RevokedAt, &g.RevokedBy, &g.RevokedByIssuer, &g.RevokedBySubject)
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal(match, &g.Match); err != nil {
		return g, fmt.Errorf("grant %q: match: %w", g.ID, err)
	}
	if len(g.Match) == 0 {
		g.Match = nil
	}
	return g, nil
}

// ActiveGrants returns the grants active at now that may decide the
// calls q names, oldest first; whether one decides a call is
// agent.Grant.Covers's to say.
func (s *Store) ActiveGrants(ctx context.Context, q agent.GrantQuery, now time.Time) ([]agent.Grant, error) {
	if err := requireJobKey(q.TenantID, q.JobID); err != nil {
		return nil, err
	}
	out, err := collect(ctx, s.pool, scanGrant, sqlActiveGrants, q.TenantID, q.AgentID, q.Tools, q.SessionID, q.JobID, now)
	if err != nil {
		return nil, fmt.Errorf("load grants of job %q: %w", q.JobID, err)
	}
	return out, nil
}

// GrantFilter narrows ListGrants: to a session or a turn, and to the
// grants active at Now unless Inactive.
type GrantFilter struct {
	SessionID, JobID string
	Inactive         bool
	Now              time.Time
	Limit            int // at most this many; default and cap MaxGrantsListed
}

// MaxGrantsListed caps a ListGrants.
const MaxGrantsListed = 1000

// ListGrants lists a tenant's grants, oldest first.
func (s *Store) ListGrants(ctx context.Context, tenantID string, f GrantFilter) ([]agent.Grant, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxGrantsListed {
		limit = MaxGrantsListed
	}
	out, err := collect(ctx, s.pool, scanGrant, sqlListGrants, tenantID, f.SessionID, f.JobID, f.Inactive, f.Now, limit)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return out, nil
}

// RevokeGrant revokes a tenant's grant at at, by by (the credential's
// caller), and returns it: from then on it decides nothing. A grant
// revoked already is returned as it was revoked; one the tenant does not
// have is CodeNotFound.
func (s *Store) RevokeGrant(ctx context.Context, tenantID, grantID string, by agent.Caller, at time.Time) (agent.Grant, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return agent.Grant{}, err
	}
	if err := agent.ValidateID("grant_id", grantID); err != nil || grantID == "" {
		return agent.Grant{}, agent.Errorf(agent.CodeInvalid, "grant_id %q: want the id of a grant, such as grant_…", words.Clip(grantID, 64))
	}
	g, err := collectOne(ctx, s.pool, scanGrant, sqlRevokeGrant, tenantID, grantID, at, by.Name, by.Issuer, by.Subject)
	if err == nil {
		return g, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return agent.Grant{}, fmt.Errorf("revoke grant %q: %w", grantID, err)
	}
	g, err = collectOne(ctx, s.pool, scanGrant, sqlGrant, tenantID, grantID)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "grant %q of tenant %q not found", grantID, tenantID), "read grant %q", grantID); err != nil {
		return agent.Grant{}, err
	}
	return g, nil
}
