package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// MCPStream is a stream of an MCP session (internal/gateway): whose it is
// and, for a tools/call's, the call it answers.
type MCPStream struct {
	SessionID, StreamID string
	TenantID, UserID    string
	// RequestID and ProgressToken are the call's JSON-RPC id and progress
	// token, as the client sent them; JobID is its turn's job id. All
	// empty for a stream that answers no tools/call.
	RequestID     json.RawMessage
	ProgressToken json.RawMessage
	JobID         string
}

// keepMCP is how long a session's streams are kept: a client may resume
// one that long after its connection dropped.
const keepMCP = "24 hours"

const (
	sqlMCPOpen = `
INSERT INTO mcp_streams (session_id, stream_id, tenant_id, user_id, request_id, progress_token, job_id)
VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))
ON CONFLICT (session_id, stream_id) DO NOTHING`

	// sqlMCPTrim drops, a few at a time, the streams of sessions past
	// keepMCP, with their messages.
	sqlMCPTrim = `
WITH old AS (
  DELETE FROM mcp_streams WHERE ctid IN (SELECT ctid FROM mcp_streams WHERE created_at < now() - $1::interval LIMIT 20)
  RETURNING session_id, stream_id)
DELETE FROM mcp_events e USING old WHERE e.session_id = old.session_id AND e.stream_id = old.stream_id`

	// One writer per stream (the session's, in order): the next index is
	// the count so far.
	sqlMCPAppend = `
INSERT INTO mcp_events (session_id, stream_id, idx, data)
SELECT $1, $2, coalesce(max(idx) + 1, 0), $3 FROM mcp_events WHERE session_id = $1 AND stream_id = $2`

	sqlMCPAfter  = `SELECT idx, data FROM mcp_events WHERE session_id = $1 AND stream_id = $2 AND idx > $3 ORDER BY idx`
	sqlMCPStream = `
SELECT tenant_id, user_id, request_id, progress_token, coalesce(job_id, '')
FROM mcp_streams WHERE session_id = $1 AND stream_id = $2`
	sqlMCPClosed = `
WITH s AS (DELETE FROM mcp_streams WHERE session_id = $1)
DELETE FROM mcp_events WHERE session_id = $1`
)

// MCPOpen records a stream as it opens; a stream recorded already is
// left as it is. It also drops a few streams past their time.
func (s *Store) MCPOpen(ctx context.Context, st MCPStream) error {
	if st.SessionID == "" || st.TenantID == "" {
		return agent.Errorf(agent.CodeInvalid, "an MCP stream needs a session and a tenant")
	}
	var req, token any
	if len(st.RequestID) > 0 {
		req = st.RequestID
	}
	if len(st.ProgressToken) > 0 {
		token = st.ProgressToken
	}
	if _, err := s.pool.Exec(ctx, sqlMCPOpen, st.SessionID, st.StreamID, st.TenantID, st.UserID, req, token, st.JobID); err != nil {
		return fmt.Errorf("open mcp stream: %w", err)
	}
	if _, err := s.pool.Exec(ctx, sqlMCPTrim, keepMCP); err != nil {
		return fmt.Errorf("trim mcp streams: %w", err)
	}
	return nil
}

// MCPAppend appends a message to a stream (nil: the priming event).
func (s *Store) MCPAppend(ctx context.Context, sessionID, streamID string, data []byte) error {
	if _, err := s.pool.Exec(ctx, sqlMCPAppend, sessionID, streamID, data); err != nil {
		return fmt.Errorf("append to mcp stream: %w", err)
	}
	return nil
}

// MCPAfter returns a stream's messages after index after, in order; an
// error when one is missing.
func (s *Store) MCPAfter(ctx context.Context, sessionID, streamID string, after int) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlMCPAfter, sessionID, streamID, after)
	if err != nil {
		return nil, fmt.Errorf("read mcp stream: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var idx int
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, fmt.Errorf("read mcp stream: %w", err)
		}
		if idx != after+1+len(out) {
			return nil, fmt.Errorf("mcp stream %s misses message %d", streamID, after+1+len(out))
		}
		out = append(out, data)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read mcp stream: %w", err)
	}
	return out, nil
}

// MCPStreamOf returns a stream's record; agent.CodeNotFound when there is
// none.
func (s *Store) MCPStreamOf(ctx context.Context, sessionID, streamID string) (MCPStream, error) {
	st := MCPStream{SessionID: sessionID, StreamID: streamID}
	var req, token []byte
	err := s.pool.QueryRow(ctx, sqlMCPStream, sessionID, streamID).Scan(&st.TenantID, &st.UserID, &req, &token, &st.JobID)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "mcp stream %q of session %q not found", streamID, sessionID), "read mcp stream"); err != nil {
		return MCPStream{}, err
	}
	st.RequestID, st.ProgressToken = req, token
	return st, nil
}

// MCPSessionClosed drops a session's streams.
func (s *Store) MCPSessionClosed(ctx context.Context, sessionID string) error {
	if _, err := s.pool.Exec(ctx, sqlMCPClosed, sessionID); err != nil {
		return fmt.Errorf("close mcp session: %w", err)
	}
	return nil
}
