-- A tenant's PII redaction (internal/guard.Config, from its catalog's
-- pii key; NULL: none), and the values its placeholders stand for, per
-- session or turn, sealed with the operator's vault key (AES-GCM): the
-- tools the tenant allows read them back; nothing else does.
ALTER TABLE tenants ADD COLUMN pii JSONB;

CREATE TABLE pii_vault (
    tenant_id   TEXT        NOT NULL,
    scope       TEXT        NOT NULL, -- "session:<id>" or "job:<id>"
    placeholder TEXT        NOT NULL,
    sealed      BYTEA       NOT NULL, -- nonce || AES-GCM ciphertext of the value
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, scope, placeholder)
);
