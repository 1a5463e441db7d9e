-- Initial schema: catalog (tenants, tools, agents and their immutable
-- versions), turns and their steps, session transcripts, results and
-- content-addressed blobs. Migrations only move forward: a newer schema must
-- keep working for the previous release so that workers can be rolled.

CREATE TABLE tenants (
    tenant_id     TEXT PRIMARY KEY,
    -- NULL until a catalog names one; checked against agents below.
    default_agent TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- tools is the tenant's tool catalog: one row per name, pointing at the
-- active version. Agents copy the resolved spec into their own versions, so a
-- tool change never alters an agent version that already exists.
CREATE TABLE tools (
    tenant_id      TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    active_version INT  NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- Immutable: rows are inserted, never updated.
CREATE TABLE tool_versions (
    tenant_id  TEXT  NOT NULL,
    name       TEXT  NOT NULL,
    version    INT   NOT NULL CHECK (version > 0),
    kind       TEXT  NOT NULL,
    spec       JSONB NOT NULL, -- agent.Tool
    spec_hash  TEXT  NOT NULL, -- sha256 hex of the canonical JSON of spec
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name, version),
    FOREIGN KEY (tenant_id, name) REFERENCES tools (tenant_id, name) ON DELETE CASCADE
);

CREATE TABLE agents (
    tenant_id      TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    agent_id       TEXT NOT NULL,
    active_version INT  NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id)
);

-- Immutable: rows are inserted, never updated. spec is the whole agent.Agent
-- with its tools resolved, so pinning a version pins its tools too.
CREATE TABLE agent_versions (
    tenant_id  TEXT  NOT NULL,
    agent_id   TEXT  NOT NULL,
    version    INT   NOT NULL CHECK (version > 0),
    spec       JSONB NOT NULL,
    spec_hash  TEXT  NOT NULL, -- sha256 hex of the canonical JSON of spec
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id, version),
    FOREIGN KEY (tenant_id, agent_id) REFERENCES agents (tenant_id, agent_id) ON DELETE CASCADE
);

ALTER TABLE agents
    ADD CONSTRAINT agents_active_version_fkey
    FOREIGN KEY (tenant_id, agent_id, active_version)
    REFERENCES agent_versions (tenant_id, agent_id, version)
    DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE tools
    ADD CONSTRAINT tools_active_version_fkey
    FOREIGN KEY (tenant_id, name, active_version)
    REFERENCES tool_versions (tenant_id, name, version)
    DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE tenants
    ADD CONSTRAINT tenants_default_agent_fkey
    FOREIGN KEY (tenant_id, default_agent)
    REFERENCES agents (tenant_id, agent_id)
    DEFERRABLE INITIALLY DEFERRED;

-- One row per turn, written when the turn starts.
CREATE TABLE turns (
    tenant_id     TEXT  NOT NULL,
    job_id        TEXT  NOT NULL,
    workflow_id   TEXT  NOT NULL,
    agent_id      TEXT  NOT NULL,
    agent_version INT   NOT NULL,
    session_id    TEXT  NOT NULL DEFAULT '',
    request       JSONB NOT NULL, -- agent.TurnRequest
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, job_id)
);

CREATE INDEX turns_session_idx ON turns (tenant_id, session_id, created_at)
    WHERE session_id <> '';

-- The conversation of one turn, so that workflow history carries ids
-- instead of transcripts.
CREATE TABLE turn_steps (
    tenant_id  TEXT   NOT NULL,
    job_id     TEXT   NOT NULL,
    seq        INT    NOT NULL CHECK (seq >= 0),
    message    JSONB  NOT NULL, -- agent.Message
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, job_id, seq),
    FOREIGN KEY (tenant_id, job_id) REFERENCES turns (tenant_id, job_id) ON DELETE CASCADE
);

-- sessions hands out message sequence numbers: appends lock the session's
-- row, so concurrent turns of one session never interleave or collide.
CREATE TABLE sessions (
    tenant_id  TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    last_seq   BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id)
);

CREATE TABLE session_messages (
    tenant_id  TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    seq        BIGINT NOT NULL CHECK (seq > 0),
    job_id     TEXT   NOT NULL,
    -- Position of the message among the messages its job appended; with
    -- job_id it makes a retried append a no-op.
    job_index  INT    NOT NULL CHECK (job_index >= 0),
    message    JSONB  NOT NULL, -- agent.Message
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, seq),
    UNIQUE (tenant_id, session_id, job_id, job_index),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, session_id) ON DELETE CASCADE
);

-- Content-addressed blobs; shared by all tenants (identical bytes are stored
-- once). Readers reach them through refs they were given.
CREATE TABLE cas_blobs (
    sha256       TEXT   PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    content_type TEXT   NOT NULL,
    size         BIGINT NOT NULL,
    data         BYTEA  NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Results of the v1 job protocol (seed 004 §3.1), one per (tenant, job).
CREATE TABLE agent_results (
    result_id         UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id         TEXT NOT NULL,
    job_id            TEXT NOT NULL, -- caller's idempotency key, not necessarily a UUID
    run_id            TEXT NOT NULL DEFAULT '',
    node_id           TEXT NOT NULL DEFAULT '',
    workflow_id       TEXT NOT NULL DEFAULT '',
    agent_id          TEXT NOT NULL DEFAULT '',
    agent_version     INT  NOT NULL DEFAULT 0,
    route_rule        TEXT NOT NULL DEFAULT '',
    protocol_version  TEXT NOT NULL DEFAULT '',

    -- Exactly one of result_data and cas_id holds the serialized result
    -- (output and preview); s3_ref is reserved for an external store.
    result_data       JSONB,
    cas_id            TEXT REFERENCES cas_blobs (sha256),
    s3_ref            TEXT,

    status            TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'rejected')),
    error             JSONB,
    tool_calls        JSONB NOT NULL DEFAULT '[]',
    tokens_used       INT NOT NULL DEFAULT 0,
    cache_hit         BOOLEAN NOT NULL DEFAULT false,
    execution_time_ms BIGINT NOT NULL DEFAULT 0,
    llm_model         TEXT NOT NULL DEFAULT '',

    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at      TIMESTAMPTZ,

    UNIQUE (tenant_id, job_id),
    CHECK (num_nonnulls(result_data, cas_id, s3_ref) = 1)
);

CREATE INDEX agent_results_run_id_idx ON agent_results (run_id);
CREATE INDEX agent_results_created_at_idx ON agent_results (created_at DESC);
-- ResultByRef for cas:// refs looks results up by tenant and blob.
CREATE INDEX agent_results_cas_idx ON agent_results (tenant_id, cas_id) WHERE cas_id IS NOT NULL;
