-- Approvals are bound to the call they decide: approval_id names the
-- waiting call (its run, step and call id), so that a call id the model
-- uses again in a later step is a call of its own, with its own record.
-- Rows of runs from before have none (''). approver_issuer and
-- approver_subject say where the approver's identity comes from (an OIDC
-- issuer and sub, or agentflow's static tokens and the token's name);
-- grant_id names the grant that decided the call, or that its approval
-- made.
ALTER TABLE approvals ADD COLUMN approval_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approver_issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approver_subject TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals DROP CONSTRAINT approvals_pkey,
    ADD PRIMARY KEY (tenant_id, job_id, call_id, approval_id);

-- Approvals remembered for the rest of a turn or of a session: each
-- decides the later calls of its tool, by its agent, in its turn (scope
-- turn) or session (scope session), whose arguments satisfy match (a
-- JSON array of {path, equals}), until it expires or is revoked. One
-- approval makes at most one grant (grant_id derives from approval_id),
-- so a retried record makes no second.
CREATE TABLE approval_grants (
    tenant_id          TEXT        NOT NULL,
    grant_id           TEXT        NOT NULL,
    scope              TEXT        NOT NULL CHECK (scope IN ('turn', 'session')),
    session_id         TEXT        NOT NULL DEFAULT '',
    job_id             TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    tool               TEXT        NOT NULL,
    match              JSONB       NOT NULL DEFAULT '[]',
    call_id            TEXT        NOT NULL,
    approval_id        TEXT        NOT NULL,
    approver           TEXT        NOT NULL,
    approver_issuer    TEXT        NOT NULL DEFAULT '',
    approver_subject   TEXT        NOT NULL DEFAULT '',
    reason             TEXT        NOT NULL DEFAULT '',
    created_at         TIMESTAMPTZ NOT NULL,
    expires_at         TIMESTAMPTZ,
    revoked_at         TIMESTAMPTZ,
    revoked_by         TEXT        NOT NULL DEFAULT '',
    revoked_by_issuer  TEXT        NOT NULL DEFAULT '',
    revoked_by_subject TEXT        NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, grant_id),
    CHECK (scope = 'turn' OR session_id <> '')
);
-- What CallModel looks up when a call's policy asks for a person.
CREATE INDEX approval_grants_active ON approval_grants (tenant_id, agent_id, tool) WHERE revoked_at IS NULL;
-- What ListGrants lists.
CREATE INDEX approval_grants_session ON approval_grants (tenant_id, session_id, created_at);
