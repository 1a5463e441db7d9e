package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

const (
	// Creates the session on its first append and locks its row, so that
	// concurrent appends to one session take sequence numbers in turn.
	// A turn's messages make a marked (inactive) session active again.
	sqlLockSession = `
INSERT INTO sessions (tenant_id, session_id) VALUES ($1, $2)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET updated_at = now(),
  state = CASE WHEN sessions.state = 'inactive' THEN 'open' ELSE sessions.state END
RETURNING last_seq`

	// Closes or marks a session; a closed session stays closed, and a
	// retry leaves it as the first write did.
	sqlEndSession = `
INSERT INTO sessions (tenant_id, session_id, state, ended_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET updated_at = now(),
  state    = CASE WHEN sessions.state = 'closed' THEN 'closed' ELSE EXCLUDED.state END,
  ended_by = CASE WHEN sessions.state = 'closed' THEN sessions.ended_by ELSE EXCLUDED.ended_by END`

	sqlSessionState = `SELECT state, ended_by FROM sessions WHERE tenant_id = $1 AND session_id = $2`

	// The job that closed a session, when it is closed and job is not a
	// turn begun before: a turn already claimed goes on.
	sqlSessionClosedTo = `
SELECT s.ended_by FROM sessions s
WHERE s.tenant_id = $1 AND s.session_id = $2 AND s.state = 'closed'
  AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = $1 AND t.job_id = $3)`

	sqlSessionHasJob = `
SELECT EXISTS (
  SELECT 1 FROM session_messages WHERE tenant_id = $1 AND session_id = $2 AND job_id = $3
)`

	sqlInsertSessionMessage = `
INSERT INTO session_messages (tenant_id, session_id, seq, job_id, job_index, message)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, session_id, job_id, job_index) DO NOTHING`

	sqlSetSessionSeq = `UPDATE sessions SET last_seq = $3 WHERE tenant_id = $1 AND session_id = $2`

	sqlSessionMessages = `
SELECT message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2
ORDER BY seq`

	sqlLastSessionMessages = `
SELECT message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2
ORDER BY seq DESC
LIMIT $3`
)

// AppendSession appends a turn's messages to the session's transcript, in
// one transaction. Idempotent per (tenant, session, job): the job's messages
// are appended once, and a retry finds them and appends nothing. The unique
// (job_id, job_index) key backs this up should two appends of the same job
// race.
func (s *Store) AppendSession(ctx context.Context, tenantID, sessionID, jobID string, msgs []agent.Message) error {
	if err := requireKey(tenantID, "session_id", sessionID); err != nil {
		return err
	}
	if err := requireJobID(jobID); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	encoded := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("append to session %q: encode message %d: %w", sessionID, i, err)
		}
		encoded[i] = b
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, sqlLockSession, tenantID, sessionID).Scan(&last); err != nil {
			return fmt.Errorf("lock session: %w", err)
		}
		var done bool
		if err := tx.QueryRow(ctx, sqlSessionHasJob, tenantID, sessionID, jobID).Scan(&done); err != nil {
			return fmt.Errorf("check job: %w", err)
		}
		if done {
			return nil
		}
		var batch pgx.Batch
		for i, b := range encoded {
			batch.Queue(sqlInsertSessionMessage, tenantID, sessionID, last+int64(i)+1, jobID, i, b)
		}
		batch.Queue(sqlSetSessionSeq, tenantID, sessionID, last+int64(len(encoded)))
		if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
			return fmt.Errorf("insert messages: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	return nil
}

// SessionMessages returns the last limit messages of a session's transcript
// in order (limit 0: all of them); none for an unknown session.
func (s *Store) SessionMessages(ctx context.Context, tenantID, sessionID string, limit int) ([]agent.Message, error) {
	if err := requireKey(tenantID, "session_id", sessionID); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "limit must not be negative, got %d", limit)
	}
	var rows pgx.Rows
	var err error
	if limit == 0 {
		rows, err = s.pool.Query(ctx, sqlSessionMessages, tenantID, sessionID)
	} else {
		rows, err = s.pool.Query(ctx, sqlLastSessionMessages, tenantID, sessionID, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("load session %q: %w", sessionID, err)
	}
	msgs, err := pgx.CollectRows(rows, scanMessage)
	if err != nil {
		return nil, fmt.Errorf("load session %q: %w", sessionID, err)
	}
	if limit > 0 {
		slices.Reverse(msgs)
	}
	return msgs, nil
}

const (
	// The last message of a job in a session, and the first: where a fork
	// through the job, or before it, ends.
	sqlSessionJobBounds = `
SELECT min(seq), max(seq) FROM session_messages
WHERE tenant_id = $1 AND session_id = $2 AND job_id = $3`

	// A fork's row names its origin (forked_from, forked_at_job), so that
	// its conversation lists it (Forks).
	sqlCreateFork = `
INSERT INTO sessions (tenant_id, session_id, last_seq, forked_from, forked_at_job) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, session_id) DO NOTHING`

	// The last message a session had when its turn $3 began: for a fork
	// before a turn that left no exchange in it (one that failed, was
	// rejected or is still running), whose place is its start.
	sqlSessionBeforeTurn = `
SELECT t.request->>'prompt',
  (SELECT coalesce(max(m.seq), 0) FROM session_messages m
   WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.created_at < t.created_at)
FROM turns t WHERE t.tenant_id = $1 AND t.job_id = $3 AND t.session_id = $2`

	sqlForks = `
SELECT session_id, forked_at_job, created_at FROM sessions
WHERE tenant_id = $1 AND forked_from = $2
ORDER BY created_at, session_id`

	sqlCopySession = `
INSERT INTO session_messages (tenant_id, session_id, seq, job_id, job_index, message)
SELECT tenant_id, $3, seq, job_id, job_index, message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2 AND seq <= $4`

	sqlFirstSessionMessage = `
SELECT message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2 AND job_id = $3
ORDER BY seq LIMIT 1`
)

// Fork is where a session is forked: at the turn of job JobID, through it
// (its exchange is the fork's last) or, with Before, before it.
type Fork struct {
	TenantID, From, To, JobID string
	Before                    bool
}

// ForkSession starts session To with the transcript of session From up to
// the fork's turn, in one transaction, and returns how many messages it
// starts with and the prompt of the turn forked at (its first message).
// To must be a new session (CodeConflict otherwise); a turn From does not
// have is CodeNotFound. With Before, a turn of From that left no exchange
// in it (failed, rejected, still running) is forked at its start: the
// messages From had when it began. The new session records where it came
// from (Forks).
func (s *Store) ForkSession(ctx context.Context, f Fork) (int, string, error) {
	for _, k := range []struct{ name, v string }{{"tenant_id", f.TenantID}, {"session_id", f.From}, {"new_session_id", f.To}} {
		if err := requireID(k.name, k.v); err != nil {
			return 0, "", err
		}
	}
	if err := requireJobID(f.JobID); err != nil {
		return 0, "", err
	}
	if f.From == f.To {
		return 0, "", agent.Errorf(agent.CodeInvalid, "new_session_id is the session forked: name a new one")
	}
	var copied int
	var prompt string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		upTo, p, err := forkPoint(ctx, tx, f)
		if err != nil {
			return err
		}
		prompt = p
		tag, err := tx.Exec(ctx, sqlCreateFork, f.TenantID, f.To, upTo, f.From, f.JobID)
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return agent.Errorf(agent.CodeConflict, "session %q exists: fork into a new one", f.To)
		}
		tag, err = tx.Exec(ctx, sqlCopySession, f.TenantID, f.From, f.To, upTo)
		if err != nil {
			return fmt.Errorf("copy transcript: %w", err)
		}
		copied = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("fork session %q: %w", f.From, err)
	}
	return copied, prompt, nil
}

// forkPoint is the last message of f.From the fork copies, and the prompt
// of the turn forked at.
func forkPoint(ctx context.Context, tx pgx.Tx, f Fork) (int64, string, error) {
	var first, last *int64
	if err := tx.QueryRow(ctx, sqlSessionJobBounds, f.TenantID, f.From, f.JobID).Scan(&first, &last); err != nil {
		return 0, "", fmt.Errorf("find turn: %w", err)
	}
	if first == nil {
		if !f.Before {
			return 0, "", agent.Errorf(agent.CodeNotFound, "session %q has no turn %q", f.From, f.JobID)
		}
		var prompt *string
		var upTo int64
		err := tx.QueryRow(ctx, sqlSessionBeforeTurn, f.TenantID, f.From, f.JobID).Scan(&prompt, &upTo)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, "", agent.Errorf(agent.CodeNotFound, "session %q has no turn %q", f.From, f.JobID)
		}
		if err != nil {
			return 0, "", fmt.Errorf("find turn's start: %w", err)
		}
		if prompt == nil {
			return upTo, "", nil
		}
		return upTo, *prompt, nil
	}
	var raw []byte
	if err := tx.QueryRow(ctx, sqlFirstSessionMessage, f.TenantID, f.From, f.JobID).Scan(&raw); err != nil {
		return 0, "", fmt.Errorf("read turn's prompt: %w", err)
	}
	var m agent.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, "", fmt.Errorf("decode turn's prompt: %w", err)
	}
	if f.Before {
		return *first - 1, m.Content, nil
	}
	return *last, m.Content, nil
}

// SessionFork is a session forked from another (ForkSession): its id, the
// turn of the other it was forked at, and when.
type SessionFork struct {
	SessionID   string
	ForkedAtJob string
	CreatedAt   time.Time
}

// Forks are the sessions of tenantID forked from session, oldest first;
// none for a session never forked, or another tenant's.
func (s *Store) Forks(ctx context.Context, tenantID, session string) ([]SessionFork, error) {
	if err := requireKey(tenantID, "session_id", session); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlForks, tenantID, session)
	if err != nil {
		return nil, fmt.Errorf("list forks of %q: %w", session, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SessionFork, error) {
		var f SessionFork
		err := row.Scan(&f.SessionID, &f.ForkedAtJob, &f.CreatedAt)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("list forks of %q: %w", session, err)
	}
	return out, nil
}

const (
	sqlSessionSummary = `
SELECT summary, summary_seq FROM sessions WHERE tenant_id = $1 AND session_id = $2`

	// The messages after the summary, newest first, at most $4.
	sqlSessionMessagesAfter = `
SELECT seq, message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2 AND seq > $3
ORDER BY seq DESC
LIMIT $4`

	// The summary advances only: a retry, or a slower writer, that would
	// take it back changes nothing, and its call is not counted again.
	sqlPutSummary = `
WITH s AS (
  UPDATE sessions SET summary = $3, summary_seq = $4, updated_at = now()
  WHERE tenant_id = $1 AND session_id = $2 AND summary_seq < $4
  RETURNING 1
)
INSERT INTO usage_ledger (tenant_id, job_id, step, attempt, agent_id, agent_version, session_id, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost)
SELECT $1, $5, 0, $6, $7, $8, $2, $9, $10, $11, $12, $13, $14 FROM s
ON CONFLICT (tenant_id, job_id, step, attempt) DO NOTHING`
)

// SessionMessage is a message of a session's transcript, with its place.
type SessionMessage struct {
	Seq int64
	agent.Message
}

// SessionMemory is what a session's model reads of its transcript: the
// summary of its messages up to SummarySeq, and the latest messages
// after it, oldest first.
type SessionMemory struct {
	Summary    string
	SummarySeq int64
	Recent     []SessionMessage
}

// SessionMemory reads a session's summary and at most limit of its latest
// messages after it; none of either for an unknown session.
func (s *Store) SessionMemory(ctx context.Context, tenantID, sessionID string, limit int) (SessionMemory, error) {
	if err := requireKey(tenantID, "session_id", sessionID); err != nil {
		return SessionMemory{}, err
	}
	if limit <= 0 {
		return SessionMemory{}, agent.Errorf(agent.CodeInvalid, "limit must be positive, got %d", limit)
	}
	var m SessionMemory
	err := s.pool.QueryRow(ctx, sqlSessionSummary, tenantID, sessionID).Scan(&m.Summary, &m.SummarySeq)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return SessionMemory{}, fmt.Errorf("load memory of session %q: %w", sessionID, err)
	}
	rows, err := s.pool.Query(ctx, sqlSessionMessagesAfter, tenantID, sessionID, m.SummarySeq, limit)
	if err != nil {
		return SessionMemory{}, fmt.Errorf("load memory of session %q: %w", sessionID, err)
	}
	var seq int64
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &raw}, func() error {
		sm := SessionMessage{Seq: seq}
		if err := json.Unmarshal(raw, &sm.Message); err != nil {
			return fmt.Errorf("decode message %d: %w", sm.Seq, err)
		}
		m.Recent = append(m.Recent, sm)
		return nil
	})
	if err != nil {
		return SessionMemory{}, fmt.Errorf("load memory of session %q: %w", sessionID, err)
	}
	slices.Reverse(m.Recent)
	return m, nil
}

// Summary is a session's summary written through message Through by a
// model call (Call: its usage, counted in the ledger under a job id of
// its own).
type Summary struct {
	Text    string
	Through int64
	Call    ModelCall
}

// PutSummary stores a session's summary, if it goes further than the one
// stored, and counts its model call in the usage ledger, in one
// statement. It reports whether it stored it.
func (s *Store) PutSummary(ctx context.Context, sum Summary) (bool, error) {
	c := sum.Call
	if err := requireKey(c.TenantID, "session_id", c.SessionID); err != nil {
		return false, err
	}
	if sum.Through <= 0 || c.Attempt < 1 {
		return false, agent.Errorf(agent.CodeInvalid, "summary through message %d, attempt %d: want both positive", sum.Through, c.Attempt)
	}
	u := c.Usage
	tag, err := s.pool.Exec(ctx, sqlPutSummary, c.TenantID, c.SessionID, sum.Text, sum.Through, c.JobID, c.Attempt, c.AgentID, c.AgentVersion, c.Model,
		max(u.PromptTokens, 0), max(u.CompletionTokens, 0), max(u.CachedTokens, 0), max(u.ReasoningTokens, 0), c.Cost)
	if err != nil {
		return false, fmt.Errorf("put summary of session %q: %w", c.SessionID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// States of a session (SessionState).
const (
	SessionOpen     = "open"
	SessionInactive = "inactive"
	SessionClosed   = "closed"
)

// SessionState is what a turn's end left a session as: its state and the
// job that closed or marked it ("" for a session never ended).
type SessionState struct {
	State   string
	EndedBy string
}

// EndSession applies a turn's session_end to its session (the turn's
// job): agent.SessionEndClose closes it, agent.SessionEndMark marks it
// inactive. Idempotent: a closed session stays closed, by its first job.
func (s *Store) EndSession(ctx context.Context, tenantID, sessionID, jobID, end string) error {
	if err := requireKey(tenantID, "session_id", sessionID); err != nil {
		return err
	}
	state := SessionInactive
	switch end {
	case agent.SessionEndClose:
		state = SessionClosed
	case agent.SessionEndMark:
	default:
		return agent.Errorf(agent.CodeInvalid, "session_end %q: want %q or %q", words.Clip(end, 50), agent.SessionEndClose, agent.SessionEndMark)
	}
	if _, err := s.pool.Exec(ctx, sqlEndSession, tenantID, sessionID, state, jobID); err != nil {
		return fmt.Errorf("end session %q: %w", sessionID, err)
	}
	return nil
}

// SessionState reads a session's state; a session never written to is
// open.
func (s *Store) SessionState(ctx context.Context, tenantID, sessionID string) (SessionState, error) {
	var st SessionState
	err := s.pool.QueryRow(ctx, sqlSessionState, tenantID, sessionID).Scan(&st.State, &st.EndedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return SessionState{State: SessionOpen}, nil
	}
	if err != nil {
		return SessionState{}, fmt.Errorf("read session %q: %w", sessionID, err)
	}
	return st, nil
}

// checkSessionOpen refuses a new turn (job) of a closed session.
func (s *Store) checkSessionOpen(ctx context.Context, tenantID, sessionID, jobID string) error {
	if sessionID == "" {
		return nil
	}
	var by string
	err := s.pool.QueryRow(ctx, sqlSessionClosedTo, tenantID, sessionID, jobID).Scan(&by)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check session %q: %w", sessionID, err)
	}
	return SessionState{State: SessionClosed, EndedBy: by}.Refusal(sessionID)
}

// Refusal is why a session in state st takes no new turn: nil unless it
// is closed.
func (st SessionState) Refusal(sessionID string) error {
	if st.State != SessionClosed {
		return nil
	}
	return agent.Errorf(agent.CodeConflict, "session %q was closed by job %q and takes no more messages: use another session", sessionID, st.EndedBy)
}
