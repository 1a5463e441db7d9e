-- A cancelled turn stores its result with status canceled, and the calls
-- that waited for approval when it was cancelled are recorded as canceled.
ALTER TABLE agent_results DROP CONSTRAINT agent_results_status_check,
    ADD CONSTRAINT agent_results_status_check CHECK (status IN ('completed', 'failed', 'rejected', 'canceled'));
ALTER TABLE approvals DROP CONSTRAINT approvals_outcome_check,
    ADD CONSTRAINT approvals_outcome_check CHECK (outcome IN ('approved', 'rejected', 'timed_out', 'canceled'));
