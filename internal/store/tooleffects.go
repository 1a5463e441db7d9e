package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
)

// Tool effects (migrations/034_tool_effects.sql, 035_resend.sql): the
// durable intents of internal/effects, one row per delivery of a tool
// call (its first, and each a person approved after an unknown outcome).
// The Store is an effects.Ledger.

var _ effects.Ledger = (*Store)(nil)

const (
	// sqlIntend takes the delivery's row for the attempt: a new row, or
	// its own (a later write of the same attempt); never another
	// attempt's.
	sqlIntend = `
INSERT INTO tool_effects (tenant_id, job_id, seq, resend, attempt, target, state)
VALUES ($1, $2, $3, $4, $5, $6, 'sending')
ON CONFLICT (tenant_id, job_id, seq, resend) DO UPDATE
  SET target = excluded.target, state = 'sending', status = 0, updated_at = now()
  WHERE tool_effects.attempt = excluded.attempt
RETURNING attempt`

	sqlDeliveryOf = `
SELECT attempt, target, state = 'delivered', status, updated_at FROM tool_effects
WHERE tenant_id = $1 AND job_id = $2 AND seq = $3 AND resend = $4`

	sqlDeliveryAnswered = `
UPDATE tool_effects SET state = 'delivered', status = $6, updated_at = now()
WHERE tenant_id = $1 AND job_id = $2 AND seq = $3 AND resend = $4 AND attempt = $5`

	sqlDeliveryRelease = `
DELETE FROM tool_effects
WHERE tenant_id = $1 AND job_id = $2 AND seq = $3 AND resend = $4 AND attempt = $5 AND state = 'sending'`
)

// Intend records that attempt is about to send target for the call k,
// unless another attempt recorded an intent for it first: then it
// returns that attempt's intent and false. A call of a turn that was
// never begun is agent.CodeNotFound.
func (s *Store) Intend(ctx context.Context, k effects.Key, attempt, target string) (effects.Intent, bool, error) {
	if err := checkDeliveryKey(k, attempt); err != nil {
		return effects.Intent{}, false, err
	}
	var got string
	err := s.pool.QueryRow(ctx, sqlIntend, k.TenantID, k.JobID, k.Seq, k.Resend, attempt, target).Scan(&got)
	switch {
	case err == nil:
		return effects.Intent{}, true, nil
	case pgCode(err) == pgForeignKeyViolation:
		return effects.Intent{}, false, agent.Errorf(agent.CodeNotFound, "turn %q of tenant %q not found: begin it before its tools write", k.JobID, k.TenantID)
	case !errors.Is(err, pgx.ErrNoRows):
		return effects.Intent{}, false, fmt.Errorf("record intent of step %d of turn %q: %w", k.Seq, k.JobID, err)
	}
	// Another attempt's row: read it. (It cannot go in between: only its
	// attempt releases it, and only before it was sent.)
	var in effects.Intent
	err = s.pool.QueryRow(ctx, sqlDeliveryOf, k.TenantID, k.JobID, k.Seq, k.Resend).Scan(&in.Attempt, &in.Target, &in.Delivered, &in.Status, &in.At)
	if errors.Is(err, pgx.ErrNoRows) {
		// Released in between: the other attempt never sent it. Take it.
		return s.Intend(ctx, k, attempt, target)
	}
	if err != nil {
		return effects.Intent{}, false, fmt.Errorf("read intent of step %d of turn %q: %w", k.Seq, k.JobID, err)
	}
	return in, false, nil
}

// Answered marks attempt's intent for the call k delivered, with the far
// side's status.
func (s *Store) Answered(ctx context.Context, k effects.Key, attempt string, status int) error {
	if err := checkDeliveryKey(k, attempt); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlDeliveryAnswered, k.TenantID, k.JobID, k.Seq, k.Resend, attempt, status); err != nil {
		return fmt.Errorf("record delivery of step %d of turn %q: %w", k.Seq, k.JobID, err)
	}
	return nil
}

// Release withdraws attempt's intent for the call k, one not yet
// answered: its write never left.
func (s *Store) Release(ctx context.Context, k effects.Key, attempt string) error {
	if err := checkDeliveryKey(k, attempt); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlDeliveryRelease, k.TenantID, k.JobID, k.Seq, k.Resend, attempt); err != nil {
		return fmt.Errorf("release intent of step %d of turn %q: %w", k.Seq, k.JobID, err)
	}
	return nil
}

func checkDeliveryKey(k effects.Key, attempt string) error {
	if err := requireJobKey(k.TenantID, k.JobID); err != nil {
		return err
	}
	if k.Seq < 0 || attempt == "" {
		return agent.Errorf(agent.CodeInvalid, "a tool effect needs a step (seq %d) and an attempt", k.Seq)
	}
	if len(k.Resend) > agent.MaxKeyLength {
		return agent.Errorf(agent.CodeInvalid, "a tool effect's resend approval id is longer than %d bytes", agent.MaxKeyLength)
	}
	return nil
}
