-- A governed call that ended without an answer (the provider refused it
-- with a 429, failed, or the connection broke): it still counts against
-- its key's request window, which the provider saw, but not toward its
-- tenant's recent grants, which order the queue: a tenant whose calls
-- were refused is not served later for it.
ALTER TABLE governor_grants ADD COLUMN unanswered BOOLEAN NOT NULL DEFAULT false;
