-- An agent version as its model receives it (agent.Compiled: its model,
-- prompt, and tools with the schemas the provider is sent), compiled once
-- and kept as an artefact named by the SHA-256 of its bytes: in the
-- object store, under object_key (compiled/sha256/<hex>), when the worker
-- has one, else here in body. Each turn reads it before its first model
-- call; one that is missing (its object deleted) or of another format
-- (compiled by an earlier release) is compiled again from the version and
-- stored again, its row then naming the new artefact. Rows are replaced,
-- never appended: the agent version itself is immutable, its artefact is
-- what it compiles to.
CREATE TABLE compiled_agents (
    tenant_id   TEXT        NOT NULL,
    agent_id    TEXT        NOT NULL,
    version     INT         NOT NULL,
    sha256      TEXT        NOT NULL,
    format      TEXT        NOT NULL, -- agent.CompiledFormat it was compiled in
    size        BIGINT      NOT NULL CHECK (size >= 0),
    object_key  TEXT        CHECK (object_key <> ''),
    body        BYTEA,
    compiled_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id, version),
    FOREIGN KEY (tenant_id, agent_id, version) REFERENCES agent_versions (tenant_id, agent_id, version) ON DELETE CASCADE,
    CONSTRAINT compiled_agents_one_body CHECK ((object_key IS NULL) <> (body IS NULL))
);

-- The compiled agent a turn began with (cas://sha256:<hex>; '' for a
-- turn begun before agents were compiled).
ALTER TABLE turns ADD COLUMN compiled_ref TEXT NOT NULL DEFAULT '';
