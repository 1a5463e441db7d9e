-- What a streaming model call has shown its followers while it runs
-- (internal/eventlog/pglive): its token batches, stored as they are
-- published, so that a follower that joins mid-call reads them, a retried
-- attempt knows what to void, and the turn's log takes all of them when
-- the call ends (with the call's result, or sealed after a failure).
-- events is the batch's JSON, indices first..last.
CREATE TABLE live_batches (
    stream_id  TEXT        NOT NULL,
    first      BIGINT      NOT NULL,
    last       BIGINT      NOT NULL CHECK (last >= first),
    events     BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (stream_id, first)
);

CREATE INDEX live_batches_created_at ON live_batches (created_at);

-- The newest model call of a stream that may still publish: its step and
-- attempt. Every publish locks the stream's row and is refused when an
-- attempt of a later step, or a later attempt of its step, has claimed
-- it; so a retried attempt (or the turn sealing a call that failed)
-- stops an earlier attempt that still runs somewhere from publishing
-- anything after it has read what was published.
CREATE TABLE live_fences (
    stream_id  TEXT        PRIMARY KEY,
    step       INT         NOT NULL,
    attempt    INT         NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
