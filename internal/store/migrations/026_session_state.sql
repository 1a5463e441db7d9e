-- What a turn's end left a session as (agent.TurnRequest.SessionEnd): open;
-- inactive (marked: the next turn of the session opens it again); or
-- closed (no later turn may join it). ended_by is the job that closed or
-- marked it.
ALTER TABLE sessions
    ADD COLUMN state    TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'inactive', 'closed')),
    ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';
