-- A turn's timeline (internal/timeline) shows what each model call read
-- of its turn: the steps it sent whole from whole_from, and those before
-- described by a digest from digest_from (0 and 0: every step whole),
-- written with the call's ledger row.
ALTER TABLE usage_ledger ADD COLUMN whole_from INT NOT NULL DEFAULT 0 CHECK (whole_from >= 0);
ALTER TABLE usage_ledger ADD COLUMN digest_from INT NOT NULL DEFAULT 0 CHECK (digest_from >= 0);

-- A fork's origin: the session it was forked from and the turn it was
-- forked at, so a conversation lists its forks ('' for a session that
-- is no fork).
ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN forked_at_job TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_forked_from_idx ON sessions (tenant_id, forked_from) WHERE forked_from <> '';
