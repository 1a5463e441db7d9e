-- The usage ledger: one row per model call the model answered, written in
-- the transaction that stores the reply (turn_steps), so that a retried
-- call that finds its reply stored adds nothing, and an attempt that died
-- before storing it added nothing either. cost is in USD, from the
-- tenant's price table when the call was made; NULL: the model had no
-- price.
CREATE TABLE usage_ledger (
    tenant_id         TEXT   NOT NULL,
    job_id            TEXT   NOT NULL,
    step              INT    NOT NULL CHECK (step >= 0),
    attempt           INT    NOT NULL CHECK (attempt >= 1),
    agent_id          TEXT   NOT NULL,
    agent_version     INT    NOT NULL,
    session_id        TEXT   NOT NULL DEFAULT '',
    model             TEXT   NOT NULL,
    input_tokens      BIGINT NOT NULL CHECK (input_tokens >= 0),
    output_tokens     BIGINT NOT NULL CHECK (output_tokens >= 0),
    cached_tokens     BIGINT NOT NULL CHECK (cached_tokens >= 0),
    reasoning_tokens  BIGINT NOT NULL CHECK (reasoning_tokens >= 0),
    cost              NUMERIC(20, 10),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, job_id, step, attempt)
);

-- Budgets sum a tenant's calls of the current day or month; GetUsage
-- reads a tenant's calls of a period.
CREATE INDEX usage_ledger_tenant_time_idx ON usage_ledger (tenant_id, created_at)
    INCLUDE (input_tokens, output_tokens, cost);

-- A tenant's price table (a JSON list of agent.Price) and budgets
-- (agent.Budgets), from its catalog; NULL: none given.
ALTER TABLE tenants ADD COLUMN prices JSONB;
ALTER TABLE tenants ADD COLUMN budgets JSONB;

-- Prompt tokens a turn's model calls read from the provider's cache
-- (agent.ResultMetadata.CachedTokens).
ALTER TABLE agent_results ADD COLUMN cached_tokens INT NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0);
