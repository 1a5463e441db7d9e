-- A session's memory: the rolling summary of its transcript up to
-- summary_seq (its messages after that are read as they are), written by
-- a model call of its own between turns (activities, Summarize).
ALTER TABLE sessions ADD COLUMN summary TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN summary_seq BIGINT NOT NULL DEFAULT 0;
