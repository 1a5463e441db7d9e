-- The intent of a tool call's writes to systems agentflow does not own
-- (internal/effects): one row per call, keyed by the step that stores
-- its result, written before a write leaves. attempt is the attempt that
-- wrote it (a random id per attempt); an attempt that finds another's row
-- does not send, and the call's outcome is unknown. state is sending
-- until the far side answers (delivered, with its HTTP status; 0 for
-- none). A row goes with its turn.
CREATE TABLE tool_effects (
    tenant_id  TEXT        NOT NULL,
    job_id     TEXT        NOT NULL,
    seq        INT         NOT NULL CHECK (seq >= 0),
    attempt    TEXT        NOT NULL CHECK (attempt <> ''),
    target     TEXT        NOT NULL,
    state      TEXT        NOT NULL CHECK (state IN ('sending', 'delivered')),
    status     INT         NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, job_id, seq),
    FOREIGN KEY (tenant_id, job_id) REFERENCES turns (tenant_id, job_id) ON DELETE CASCADE
);
