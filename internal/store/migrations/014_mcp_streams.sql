-- The streams of the gateway's MCP sessions (internal/gateway, mcp.go):
-- what was sent on each, so that a client whose connection dropped
-- resumes it with Last-Event-ID on any gateway, and, for a tools/call,
-- the call it answers, so that a gateway that did not start the call can
-- finish its stream from the turn's event log. user_id is the token's
-- tenant and name: only the token that opened the session resumes it.
CREATE TABLE mcp_streams (
    session_id     TEXT        NOT NULL,
    stream_id      TEXT        NOT NULL,
    tenant_id      TEXT        NOT NULL,
    user_id        TEXT        NOT NULL,
    request_id     JSONB,
    progress_token JSONB,
    job_id         TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, stream_id)
);

CREATE INDEX mcp_streams_created_at ON mcp_streams (created_at);

-- The messages of a stream, in order from 0 (data NULL: the stream's
-- priming event, which carries none).
CREATE TABLE mcp_events (
    session_id TEXT  NOT NULL,
    stream_id  TEXT  NOT NULL,
    idx        INT   NOT NULL CHECK (idx >= 0),
    data       BYTEA,
    PRIMARY KEY (session_id, stream_id, idx)
);
