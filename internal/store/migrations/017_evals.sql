-- Evaluations: a run of a dataset against one or two versions of an
-- agent (the Evaluation workflow), and each case's result on each
-- version, written once by the activity that scored it.
CREATE TABLE eval_runs (
    tenant_id    TEXT        NOT NULL,
    eval_id      TEXT        NOT NULL,
    dataset      TEXT        NOT NULL,
    agent_id     TEXT        NOT NULL,
    versions     INT[]       NOT NULL,
    cases        INT         NOT NULL CHECK (cases > 0),
    status       TEXT        NOT NULL CHECK (status IN ('running', 'completed')),
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ,
    PRIMARY KEY (tenant_id, eval_id)
);

CREATE TABLE eval_cases (
    tenant_id   TEXT        NOT NULL,
    eval_id     TEXT        NOT NULL,
    case_id     TEXT        NOT NULL,
    version     INT         NOT NULL,
    ord         INT         NOT NULL, -- the case's place in the dataset
    result      JSONB       NOT NULL, -- agent.EvalCaseResult
    passed      BOOLEAN     NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, eval_id, case_id, version),
    FOREIGN KEY (tenant_id, eval_id) REFERENCES eval_runs ON DELETE CASCADE
);
