package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeliveryAttempt is one attempt at pushing a turn's result to a deliver
// target, and its outcome: delivered, retrying (it failed, another
// attempt follows) or failed (for good).
type DeliveryAttempt struct {
	DeliveryID string
	Attempt    int
	JobID      string
	Target     string
	Kind       string
	Outcome    string
	HTTPStatus int
	Error      string
	At         time.Time // when the attempt was recorded; set by the database
}

// Outcomes of a delivery attempt.
const (
	DeliveryDelivered = "delivered"
	DeliveryRetrying  = "retrying"
	DeliveryFailed    = "failed"
)

const sqlRecordDeliveryAttempt = `
INSERT INTO delivery_attempts (tenant_id, delivery_id, attempt, job_id, target, kind, outcome, http_status, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (tenant_id, delivery_id, attempt) DO UPDATE
SET outcome = EXCLUDED.outcome, http_status = EXCLUDED.http_status, error = EXCLUDED.error, at = now()`

// RecordDeliveryAttempt stores an attempt's outcome; writing the same
// attempt again overwrites it.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, tenantID string, a DeliveryAttempt) error {
	if _, err := s.pool.Exec(ctx, sqlRecordDeliveryAttempt, tenantID, a.DeliveryID, a.Attempt, a.JobID, a.Target, a.Kind,
		a.Outcome, a.HTTPStatus, a.Error); err != nil {
		return fmt.Errorf("record delivery attempt: %w", err)
	}
	return nil
}

const sqlDeliveryAttempts = `
SELECT delivery_id, attempt, job_id, target, kind, outcome, http_status, error, at
FROM delivery_attempts WHERE tenant_id = $1 AND job_id = $2 ORDER BY delivery_id, attempt`

// DeliveryAttempts are the attempts at delivering a job's result, by
// delivery and attempt.
func (s *Store) DeliveryAttempts(ctx context.Context, tenantID, jobID string) ([]DeliveryAttempt, error) {
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (DeliveryAttempt, error) {
		var a DeliveryAttempt
		err := row.Scan(&a.DeliveryID, &a.Attempt, &a.JobID, &a.Target, &a.Kind, &a.Outcome, &a.HTTPStatus, &a.Error, &a.At)
		return a, err
	}, sqlDeliveryAttempts, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("delivery attempts: %w", err)
	}
	return out, nil
}
