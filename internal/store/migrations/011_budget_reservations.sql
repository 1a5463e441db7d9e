-- A model call's worst case (its counted prompt plus the most output it
-- may write), held against its tenant's budgets from just before the call
-- is sent until its reply is stored (PutReply deletes it in the
-- transaction that writes the ledger row, so the call counts once: as a
-- reservation, then as usage). Keyed like the ledger, by the activity
-- attempt: a retried write of one attempt changes nothing, and a later
-- attempt of the step deletes the reservations of the attempts before it,
-- which died or failed. expires_at bounds the reservation of an attempt
-- that died with no later attempt: the attempt's own deadline, past which
-- it cannot be running. cost is in USD, 0 when the model has no price.
CREATE TABLE budget_reservations (
    tenant_id   TEXT   NOT NULL,
    job_id      TEXT   NOT NULL,
    step        INT    NOT NULL CHECK (step >= 0),
    attempt     INT    NOT NULL CHECK (attempt >= 1),
    tokens      BIGINT NOT NULL CHECK (tokens >= 0),
    cost        NUMERIC(20, 10) NOT NULL CHECK (cost >= 0),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, job_id, step, attempt)
);

CREATE INDEX budget_reservations_tenant_idx ON budget_reservations (tenant_id, expires_at);

-- One row per tenant whose calls reserve: each reservation locks it (FOR
-- UPDATE) before it sums the tenant's usage and reservations, so that a
-- tenant's reservations are checked one at a time and concurrent calls
-- cannot all pass on the same sum.
CREATE TABLE budget_locks (
    tenant_id TEXT PRIMARY KEY
);
