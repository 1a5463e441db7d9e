-- An ask_user call's outcome is recorded beside approvals: who answered,
-- when, and how (the answer itself is the call's stored result).
ALTER TABLE approvals DROP CONSTRAINT approvals_outcome_check,
    ADD CONSTRAINT approvals_outcome_check CHECK (outcome IN ('approved', 'rejected', 'timed_out', 'canceled', 'answered'));
