-- Retention (internal/store/retention.go): the operator's TTLs for blobs,
-- results and transcripts, which a tenant's catalog may only narrow
-- (NULL: the operator's), and an append-only log of what each sweep
-- deleted, written in the transaction of the delete it records, so that
-- it neither misses nor invents one.
ALTER TABLE tenants ADD COLUMN retention JSONB;

CREATE TABLE audit_log (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id    TEXT   NOT NULL, -- the sweep's workflow id
    tenant_id TEXT   NOT NULL,
    kind      TEXT   NOT NULL CHECK (kind IN ('blobs', 'results', 'transcripts')),
    count     INT    NOT NULL CHECK (count > 0),
    -- What went: sha256 of blobs whose owner row went, job ids of results
    -- and turns, session/seq of session messages; digest is the sha256 of
    -- refs joined by newlines, in this order.
    refs      TEXT[] NOT NULL,
    digest    TEXT   NOT NULL,
    -- sha256 of the blobs whose last reference went with them: their row,
    -- their chunks and their object in the object store.
    freed     TEXT[] NOT NULL DEFAULT '{}',
    at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at);
CREATE INDEX audit_log_run ON audit_log (run_id);

-- What a sweep pages through: each kind's rows of a tenant by age, and
-- the references that keep a blob.
CREATE INDEX blob_owners_tenant_created ON blob_owners (tenant_id, created_at);
CREATE INDEX agent_results_tenant_created ON agent_results (tenant_id, created_at);
CREATE INDEX agent_results_cas_any ON agent_results (cas_id) WHERE cas_id IS NOT NULL;
CREATE INDEX agent_results_data_ref ON agent_results (tenant_id, data_ref) WHERE data_ref <> '';
CREATE INDEX turns_tenant_created ON turns (tenant_id, created_at);
CREATE INDEX session_messages_tenant_created ON session_messages (tenant_id, created_at);
-- A blob's owners by hash: freeing a blob asks whether any is left, and
-- deleting its row checks blob_owners' foreign key; without it each is a
-- scan of every owner, and a sweep of n blobs takes n scans.
CREATE INDEX blob_owners_sha256 ON blob_owners (sha256);
