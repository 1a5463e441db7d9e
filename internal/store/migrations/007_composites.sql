-- Auto-promotion: a pipeline a tenant runs again becomes a tool of its
-- own (a composite), granted to the agents that take composites.
ALTER TABLE tenants ADD COLUMN promote_after INT NOT NULL DEFAULT 2 CHECK (promote_after >= 0);

-- Runs of pipelines not promoted yet, by shape (internal/pipeline.Shape);
-- a retried call is one run. Trimmed after 30 days.
CREATE TABLE pipeline_runs (
    tenant_id  TEXT NOT NULL,
    shape      TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    call_id    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, shape, job_id, call_id)
);
CREATE INDEX pipeline_runs_created_idx ON pipeline_runs (created_at);

-- One composite per shape and tenant: two runs never make two tools.
CREATE TABLE composites (
    tenant_id  TEXT NOT NULL,
    shape      TEXT NOT NULL,
    tool_name  TEXT NOT NULL,
    runs       INT  NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, shape)
);

-- search_tools: full text over tools' names, descriptions and arguments.
CREATE INDEX tool_versions_search_idx ON tool_versions USING GIN (to_tsvector('english',
    translate(name, '_-', '  ') || ' ' || coalesce(spec ->> 'description', '') || ' ' || coalesce(spec ->> 'parameters', '')));
