-- A tenant's egress allowlist, from its catalog: the hosts and address
-- ranges its tools may call (internal/egress).
ALTER TABLE tenants ADD COLUMN egress JSONB NOT NULL DEFAULT '[]';

-- Blobs are stored once by content; each tenant that stored one may read
-- it, and no other: a ref of another tenant is not found.
CREATE TABLE blob_owners (
    tenant_id  TEXT NOT NULL,
    sha256     TEXT NOT NULL REFERENCES cas_blobs (sha256),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sha256)
);

-- The data a turn's answer rests on (the last tool's), by reference.
ALTER TABLE agent_results ADD COLUMN data_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_results ADD COLUMN session_id TEXT NOT NULL DEFAULT '';
CREATE INDEX agent_results_session_idx ON agent_results (tenant_id, session_id, created_at) WHERE session_id <> '';

-- Results of pure tool calls (pipelines) by the hash of their canonical
-- JSON, per tenant, until they expire.
CREATE TABLE tool_cache (
    tenant_id  TEXT NOT NULL,
    key        TEXT NOT NULL,
    result     BYTEA NOT NULL, -- the output as the tool gave it, byte for byte
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX tool_cache_expires_idx ON tool_cache (expires_at);
