-- The provider governor's state, shared by every worker process: one row
-- per governed key (a provider, or one of its models), locked (FOR UPDATE)
-- by each admission, so that the fleet's admissions to a key are decided
-- one at a time against the same counts. paused_until, when set, is how long the
-- provider asked the key to wait (a 429's Retry-After or rate-limit
-- reset headers). Times are the database's clock, so that workers on
-- machines whose clocks disagree still count one window.
CREATE TABLE governor_keys (
    key          TEXT PRIMARY KEY,
    paused_until TIMESTAMPTZ
);

-- A call admitted to a key: it counts against the key's request and token
-- windows from granted_at, and holds one of its concurrent slots until
-- held_until (NULL once released). Its tokens are the call's worst case
-- until it settles to the provider's count. call_id is the tenant, job,
-- step and activity attempt, so that a retried admission of one attempt
-- finds its grant, and a later attempt (which sends the request again)
-- counts again.
CREATE TABLE governor_grants (
    key           TEXT        NOT NULL,
    call_id       TEXT        NOT NULL,
    tenant_id     TEXT        NOT NULL,
    granted_at    TIMESTAMPTZ NOT NULL,
    input_tokens  BIGINT      NOT NULL CHECK (input_tokens >= 0),
    output_tokens BIGINT      NOT NULL CHECK (output_tokens >= 0),
    held_until    TIMESTAMPTZ,
    PRIMARY KEY (key, call_id)
);

CREATE INDEX governor_grants_window_idx ON governor_grants (key, granted_at);
-- Each waiter's tenant's recent grants, for the queue's order.
CREATE INDEX governor_grants_tenant_idx ON governor_grants (key, tenant_id, granted_at);

-- A call waiting for a key: the admission of each waiter picks the next
-- call to admit among them (priority, then the tenant with the fewest
-- recent grants, then the oldest). alive_until lapses when the waiting
-- worker stops asking, so a dead worker's call does not hold the queue.
CREATE TABLE governor_waiters (
    key         TEXT        NOT NULL,
    call_id     TEXT        NOT NULL,
    tenant_id   TEXT        NOT NULL,
    priority    INT         NOT NULL,
    since       TIMESTAMPTZ NOT NULL,
    alive_until TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key, call_id)
);
