-- Evaluation datasets made from recorded turns: the selection that made
-- one and its cases, which name recorded turns (job and workflow ids,
-- steps) and copy none of their text. Written once per (tenant, id).
CREATE TABLE eval_datasets (
    tenant_id   TEXT        NOT NULL,
    dataset_id  TEXT        NOT NULL,
    agent_id    TEXT        NOT NULL,
    selection   JSONB       NOT NULL, -- agent.RecordSelection
    dataset     JSONB       NOT NULL, -- agent.EvalDataset, its cases by reference
    cases       INT         NOT NULL CHECK (cases > 0),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, dataset_id)
);

-- A selection reads a tenant's results of one agent by time.
CREATE INDEX agent_results_recordings_idx ON agent_results (tenant_id, agent_id, created_at);
