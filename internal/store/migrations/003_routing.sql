-- Routing rules and a per-tenant catalog version. The version grows with
-- every change to the tenant's catalog, so that workers can cache what they
-- compiled from it (routing programs) per version; a NOTIFY on
-- agentflow_catalog names the tenant when it changes.
CREATE TABLE routing_rules (
    tenant_id  TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    priority   INT  NOT NULL,
    condition  TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

ALTER TABLE tenants ADD COLUMN catalog_version BIGINT NOT NULL DEFAULT 1;
