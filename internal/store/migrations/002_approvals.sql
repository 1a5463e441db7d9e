-- Decisions on tool calls that needed a person's approval. One row per call:
-- the first decision stands (a retried activity writes nothing new).
CREATE TABLE approvals (
    tenant_id    TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args         JSONB,
    outcome      TEXT NOT NULL CHECK (outcome IN ('approved', 'rejected', 'timed_out')),
    reason       TEXT NOT NULL DEFAULT '',
    approver     TEXT NOT NULL DEFAULT '',
    via          TEXT NOT NULL DEFAULT '',
    requested_at TIMESTAMPTZ NOT NULL,
    decided_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, job_id, call_id)
);
