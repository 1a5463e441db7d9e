package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Reservation is a model call's worst case, held against its tenant's
// budgets while the call runs: keyed by the call's step and activity
// attempt, like the ledger row that settles it.
type Reservation struct {
	TenantID string
	JobID    string
	Step     int // the step the reply will be stored as
	Attempt  int // the activity attempt that calls the model
	// Want is the most the call may use: its counted prompt plus its
	// max_tokens of output, and their cost.
	Want agent.Spent
	// TTL bounds how long the reservation is held if the attempt dies
	// with no later attempt to release it: the attempt's time left.
	TTL time.Duration
}

const (
	sqlEnsureBudgetLock = `INSERT INTO budget_locks (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING`
	sqlLockBudget       = `SELECT 1 FROM budget_locks WHERE tenant_id = $1 FOR UPDATE`

	// Reservations that expired, and those of the step's earlier
	// attempts, which died or failed, hold nothing any more.
	sqlDropDeadReservations = `
DELETE FROM budget_reservations
WHERE tenant_id = $1 AND (expires_at <= clock_timestamp() OR (job_id = $2 AND step = $3 AND attempt < $4))`

	sqlHasReservation = `
SELECT EXISTS (SELECT 1 FROM budget_reservations WHERE tenant_id = $1 AND job_id = $2 AND step = $3 AND attempt = $4)`

	// One statement, so one snapshot: a reply stored in between (its
	// ledger row written, its reservation deleted) is seen as one or the
	// other, never as neither or both. A row per period start in $2.
	sqlBudgetUse = `
SELECT l.tokens, l.cost, r.tokens, r.cost
FROM unnest($2::timestamptz[]) WITH ORDINALITY AS p(since, i)
CROSS JOIN LATERAL (
  SELECT COALESCE(sum(input_tokens + output_tokens), 0)::bigint AS tokens, COALESCE(sum(cost), 0)::float8 AS cost
  FROM usage_ledger WHERE tenant_id = $1 AND created_at >= p.since) l
CROSS JOIN (
  SELECT COALESCE(sum(tokens), 0)::bigint AS tokens, COALESCE(sum(cost), 0)::float8 AS cost
  FROM budget_reservations WHERE tenant_id = $1 AND expires_at > clock_timestamp()) r
ORDER BY p.i`

	sqlInsertReservation = `
INSERT INTO budget_reservations (tenant_id, job_id, step, attempt, tokens, cost, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() + make_interval(secs => $7))`

	sqlReleaseReservation = `
DELETE FROM budget_reservations WHERE tenant_id = $1 AND job_id = $2 AND step = $3 AND attempt = $4`

	// A stored reply settles every reservation of its step: the ledger
	// row now counts the call.
	sqlReserved = `
SELECT COALESCE(sum(tokens), 0)::bigint, COALESCE(sum(cost), 0)::float8
FROM budget_reservations WHERE tenant_id = $1 AND expires_at > clock_timestamp()`
)

// Reserve holds r.Want against each of periods (the tenant's budgeted
// periods, whose starts are taken at now), or refuses with
// BudgetExceeded when a period's usage and the reservations of the
// tenant's calls in flight have reached its budget. The check and the
// reservation are one transaction holding the tenant's budget lock, so
// calls reserving at once are checked one after the other, each seeing
// the reservations before it: a call passes only when its reservation
// fits beside theirs, so together they never pass a budget. A reservation already held under r's key is kept
// and passes again (a retried write of the same attempt); the
// reservations of the step's earlier attempts are released.
func (s *Store) Reserve(ctx context.Context, r Reservation, periods []agent.PeriodBudget, now time.Time) error {
	if err := requireJobKey(r.TenantID, r.JobID); err != nil {
		return err
	}
	if r.Step < 0 || r.Attempt < 1 || r.Want.Tokens < 0 || r.Want.Cost < 0 || r.TTL <= 0 {
		return agent.Errorf(agent.CodeInvalid, "reservation at step %d, attempt %d of %d tokens and %v USD for %s: want a step of 0 or more, an attempt of 1 or more, no negative amount and a positive time to live",
			r.Step, r.Attempt, r.Want.Tokens, r.Want.Cost, r.TTL)
	}
	if len(periods) == 0 {
		return nil
	}
	since := make([]time.Time, len(periods))
	for i, p := range periods {
		since[i] = agent.PeriodStart(p.Period, now)
	}
	// The tenant's lock row is made outside the transaction that locks it:
	// two first reservations inserting it at once would otherwise wait on
	// each other's insert to learn it exists.
	if _, err := s.pool.Exec(ctx, sqlEnsureBudgetLock, r.TenantID); err != nil {
		return fmt.Errorf("reserve budget of tenant %q: %w", r.TenantID, err)
	}
	var refused error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		refused = nil
		if _, err := tx.Exec(ctx, sqlLockBudget, r.TenantID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDropDeadReservations, r.TenantID, r.JobID, r.Step, r.Attempt); err != nil {
			return err
		}
		var held bool
		if err := tx.QueryRow(ctx, sqlHasReservation, r.TenantID, r.JobID, r.Step, r.Attempt).Scan(&held); err != nil || held {
			return err
		}
		rows, err := tx.Query(ctx, sqlBudgetUse, r.TenantID, since)
		if err != nil {
			return err
		}
		use, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([2]agent.Spent, error) {
			var u [2]agent.Spent
			err := row.Scan(&u[0].Tokens, &u[0].Cost, &u[1].Tokens, &u[1].Cost)
			return u, err
		})
		if err != nil {
			return err
		}
		for i, p := range periods {
			if refused = p.Exceeded(r.TenantID, use[i][0], use[i][1], r.Want); refused != nil {
				return nil
			}
		}
		_, err = tx.Exec(ctx, sqlInsertReservation, r.TenantID, r.JobID, r.Step, r.Attempt, r.Want.Tokens, r.Want.Cost, r.TTL.Seconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("reserve budget of tenant %q: %w", r.TenantID, err)
	}
	return refused
}

// ReleaseReservation gives back what an attempt reserved, when its call
// failed with no reply to store. Releasing what is not held is no error.
func (s *Store) ReleaseReservation(ctx context.Context, tenantID, jobID string, step, attempt int) error {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlReleaseReservation, tenantID, jobID, step, attempt); err != nil {
		return fmt.Errorf("release reservation of turn %q step %d: %w", jobID, step, err)
	}
	return nil
}

// Reserved sums the reservations a tenant's calls in flight hold.
func (s *Store) Reserved(ctx context.Context, tenantID string) (agent.Spent, error) {
	var sp agent.Spent
	if err := s.pool.QueryRow(ctx, sqlReserved, tenantID).Scan(&sp.Tokens, &sp.Cost); err != nil {
		return agent.Spent{}, fmt.Errorf("sum reservations of tenant %q: %w", tenantID, err)
	}
	return sp, nil
}
