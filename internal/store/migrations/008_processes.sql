-- Process definitions: JSON documents of nodes and edges, per tenant and
-- tag (the workflow_tag of the job protocol), in immutable versions. The
-- catalog gives a process its first version; patch_workflow calls add
-- more, each recorded in process_patches.
CREATE TABLE processes (
    tenant_id       TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    tag             TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    latest_version  INT  NOT NULL CHECK (latest_version > 0),
    -- The version whose definition and schema the catalog last gave (or
    -- matched): an entry applied again unchanged makes no version, so
    -- that patched versions stay the latest.
    catalog_version INT NOT NULL CHECK (catalog_version > 0),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, tag)
);

-- Immutable: rows are inserted, never updated.
CREATE TABLE process_versions (
    tenant_id    TEXT  NOT NULL,
    tag          TEXT  NOT NULL,
    version      INT   NOT NULL CHECK (version > 0),
    definition   JSONB NOT NULL,
    -- The JSON Schema the definition satisfies besides the built-in rules
    -- (internal/process); NULL: none. A patch keeps its version's.
    schema       JSONB,
    content_hash TEXT  NOT NULL, -- sha256 hex of the canonical {definition, schema}
    source       TEXT  NOT NULL CHECK (source IN ('catalog', 'patch')),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, tag, version),
    FOREIGN KEY (tenant_id, tag) REFERENCES processes (tenant_id, tag) ON DELETE CASCADE
);

-- The audit of patches, written in the transaction that stores the
-- version a patch made: who approved it, which turn and tool call made
-- it, why, the operations as applied, and the versions it went from and to.
CREATE TABLE process_patches (
    tenant_id    TEXT NOT NULL,
    patch_id     TEXT NOT NULL,
    tag          TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    workflow_id  TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    approver     TEXT NOT NULL DEFAULT '', -- '': the call needed no approval
    description  TEXT NOT NULL,
    operations   JSON NOT NULL,            -- RFC 6902, byte for byte as applied
    from_version INT  NOT NULL,
    to_version   INT  NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, patch_id),
    -- A retried tool call finds its patch instead of making another.
    UNIQUE (tenant_id, job_id, call_id),
    UNIQUE (tenant_id, tag, to_version),
    FOREIGN KEY (tenant_id, tag, to_version) REFERENCES process_versions (tenant_id, tag, version) ON DELETE CASCADE
);
