-- Each attempt at pushing a turn's result to a deliver target (a webhook
-- or a Telegram chat) and its outcome: the audit of deliveries. An
-- attempt is keyed by its delivery and number, so that a retried write
-- of the same attempt is harmless. No secret and no body is stored.
CREATE TABLE delivery_attempts (
    tenant_id   TEXT        NOT NULL,
    delivery_id TEXT        NOT NULL,
    attempt     INT         NOT NULL,
    job_id      TEXT        NOT NULL,
    target      TEXT        NOT NULL,
    kind        TEXT        NOT NULL,
    outcome     TEXT        NOT NULL, -- delivered | retrying | failed
    http_status INT         NOT NULL DEFAULT 0,
    error       TEXT        NOT NULL DEFAULT '',
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, delivery_id, attempt)
);
CREATE INDEX delivery_attempts_job ON delivery_attempts (tenant_id, job_id);
