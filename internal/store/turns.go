package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentflow/agentflow/internal/agent"
)

// Turn is the record of one agent turn, written when it starts.
type Turn struct {
	TenantID     string
	JobID        string
	WorkflowID   string
	AgentID      string
	AgentVersion int
	SessionID    string
	Request      agent.TurnRequest
	// TurnsPerMinute, when positive, refuses a new turn (CodeRateLimited) while
	// the agent already has that many turns begun in the last minute.
	TurnsPerMinute int
	// Prompt, when set, is stored as step 0 once the claim is the turn's
	// (PutStep): a new turn's claim and prompt are one statement.
	Prompt *agent.Message
	// CompiledRef is the compiled agent the turn began with
	// (agent.CompiledRef); "" for none.
	CompiledRef string
}

const (
	sqlInsertTurn = `
INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, session_id, request, compiled_ref)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, job_id) DO NOTHING`

	// sqlInsertTurnWithPrompt claims a job and stores its prompt as step
	// 0 in one statement (the step's foreign key is checked at the
	// statement's end, when the claim is there); it stores no step when
	// the job was claimed before, and reports whether it claimed it.
	sqlInsertTurnWithPrompt = `
WITH claimed AS (
  INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, session_id, request, compiled_ref)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $9)
  ON CONFLICT (tenant_id, job_id) DO NOTHING
  RETURNING tenant_id, job_id
), prompt AS (
  INSERT INTO turn_steps (tenant_id, job_id, seq, message)
  SELECT tenant_id, job_id, 0, $8 FROM claimed
  ON CONFLICT (tenant_id, job_id, seq) DO NOTHING
)
SELECT count(*) FROM claimed`

	sqlLockAgentRate = `SELECT pg_advisory_xact_lock(hashtext($1))`
	sqlTurnExists    = `SELECT EXISTS (SELECT 1 FROM turns WHERE tenant_id = $1 AND job_id = $2)`
	sqlRecentTurns   = `
SELECT count(*) FROM turns
WHERE tenant_id = $1 AND agent_id = $2 AND created_at > now() - interval '1 minute'`

	sqlTurn = `
SELECT workflow_id, agent_id, agent_version, session_id, request, compiled_ref
FROM turns WHERE tenant_id = $1 AND job_id = $2`
)

// BeginTurn records the start of a turn: the job's claim, written once.
// Idempotent: when the (tenant, job) row exists with the same request,
// workflow and agent — a retried activity or a replayed start — it does
// nothing and the first write stands. A job id reused for another request
// (agent.TurnRequest.Hash), by another workflow or for another agent is
// agent.CodeConflict. The check costs nothing on the way of a new turn:
// only a start that finds the row reads it. With t.Prompt, the prompt is
// stored as step 0 once the claim is found to be the turn's: for a new
// turn without a rate to count, in the claim's own statement.
func (s *Store) BeginTurn(ctx context.Context, t Turn) error {
	if err := checkTurn(t); err != nil {
		return err
	}
	req, err := json.Marshal(t.Request)
	if err != nil {
		return fmt.Errorf("begin turn %q: encode request: %w", t.JobID, err)
	}
	if err := s.checkSessionOpen(ctx, t.TenantID, t.SessionID, t.JobID); err != nil {
		return err
	}
	c := &turnClaim{t: t, req: req}
	promptStored := false
	switch {
	case t.TurnsPerMinute > 0:
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return c.claim(ctx, tx) })
	case t.Prompt != nil:
		// Without a rate to count, the claim and the prompt are one
		// statement: no transaction to open and commit around it.
		var msg []byte
		if msg, err = json.Marshal(t.Prompt); err != nil {
			return fmt.Errorf("begin turn %q: encode prompt: %w", t.JobID, err)
		}
		var n int
		err = s.pool.QueryRow(ctx, sqlInsertTurnWithPrompt, t.TenantID, t.JobID, t.WorkflowID, t.AgentID, t.AgentVersion, t.SessionID, req, msg, t.CompiledRef).Scan(&n)
		c.inserted = err == nil && n == 1
		promptStored = c.inserted
	default:
		err = c.insert(ctx, s.pool)
	}
	if err != nil {
		if agent.IsCode(err, agent.CodeRateLimited) {
			return err
		}
		return fmt.Errorf("begin turn %q: %w", t.JobID, err)
	}
	if !c.inserted {
		if err := s.sameTurn(ctx, t); err != nil {
			return err
		}
	}
	if t.Prompt != nil && !promptStored {
		return s.PutStep(ctx, t.TenantID, t.JobID, 0, *t.Prompt)
	}
	return nil
}

// checkTurn checks what BeginTurn stores of a turn before it touches the
// database.
func checkTurn(t Turn) error {
	if err := requireJobKey(t.TenantID, t.JobID); err != nil {
		return err
	}
	if err := requireID("agent_id", t.AgentID); err != nil {
		return err
	}
	if t.WorkflowID == "" {
		return agent.Errorf(agent.CodeInvalid, "workflow_id is required")
	}
	if t.AgentVersion <= 0 {
		return agent.Errorf(agent.CodeInvalid, "agent_version must be positive, got %d", t.AgentVersion)
	}
	return agent.ValidateID("session_id", t.SessionID)
}

// turnClaim is BeginTurn's claim of a job for a turn: the turn, its
// encoded request, and whether a statement inserted its row (false: the
// row was there, and sameTurn decides).
type turnClaim struct {
	t        Turn
	req      []byte
	inserted bool
}

// insert inserts the turn's row, unless the job has one.
func (c *turnClaim) insert(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) error {
	t := c.t
	tag, err := q.Exec(ctx, sqlInsertTurn, t.TenantID, t.JobID, t.WorkflowID, t.AgentID, t.AgentVersion, t.SessionID, c.req, t.CompiledRef)
	c.inserted = err == nil && tag.RowsAffected() == 1
	return err
}

// claim counts the agent's turns of the last minute, under its lock,
// before it inserts the turn.
func (c *turnClaim) claim(ctx context.Context, tx pgx.Tx) error {
	t := c.t
	// One counter per agent: concurrent starts wait here, so the
	// limit holds exactly.
	if _, err := tx.Exec(ctx, sqlLockAgentRate, t.TenantID+"/"+t.AgentID); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, sqlTurnExists, t.TenantID, t.JobID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		var recent int
		if err := tx.QueryRow(ctx, sqlRecentTurns, t.TenantID, t.AgentID).Scan(&recent); err != nil {
			return err
		}
		if recent >= t.TurnsPerMinute {
			return agent.Errorf(agent.CodeRateLimited, "agent %q of tenant %q allows %d turns a minute and has had them; try again shortly",
				t.AgentID, t.TenantID, t.TurnsPerMinute)
		}
	}
	return c.insert(ctx, tx)
}

// sameTurn checks that the claim stored for t's job is t's: the same
// request, workflow and agent.
func (s *Store) sameTurn(ctx context.Context, t Turn) error {
	stored, err := s.Turn(ctx, t.TenantID, t.JobID)
	if err != nil {
		return fmt.Errorf("begin turn %q: %w", t.JobID, err)
	}
	if stored.Request.Hash() != t.Request.Hash() {
		return agent.Errorf(agent.CodeConflict, "job id %q of tenant %q names another request (started by workflow %q); use a new job id",
			t.JobID, t.TenantID, stored.WorkflowID)
	}
	if stored.WorkflowID != t.WorkflowID {
		return agent.Errorf(agent.CodeConflict, "job %q of tenant %q was already started by workflow %q", t.JobID, t.TenantID, stored.WorkflowID)
	}
	if stored.AgentID != t.AgentID {
		return agent.Errorf(agent.CodeConflict, "job %q of tenant %q already runs agent %q, not %q", t.JobID, t.TenantID, stored.AgentID, t.AgentID)
	}
	return nil
}

// Turn returns the record of a turn; agent.CodeNotFound when absent.
func (s *Store) Turn(ctx context.Context, tenantID, jobID string) (Turn, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return Turn{}, err
	}
	t := Turn{TenantID: tenantID, JobID: jobID}
	var req []byte
	err := s.pool.QueryRow(ctx, sqlTurn, tenantID, jobID).Scan(&t.WorkflowID, &t.AgentID, &t.AgentVersion, &t.SessionID, &req, &t.CompiledRef)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "turn %q of tenant %q not found", jobID, tenantID), "load turn %q", jobID); err != nil {
		return Turn{}, err
	}
	if err := json.Unmarshal(req, &t.Request); err != nil {
		return Turn{}, fmt.Errorf("load turn %q: decode request: %w", jobID, err)
	}
	return t, nil
}

const (
	sqlInsertStep = `
INSERT INTO turn_steps (tenant_id, job_id, seq, message)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, job_id, seq) DO NOTHING`

	sqlSteps = `
SELECT message FROM turn_steps
WHERE tenant_id = $1 AND job_id = $2
ORDER BY seq`

	sqlStep = `
SELECT message FROM turn_steps
WHERE tenant_id = $1 AND job_id = $2 AND seq = $3`

	sqlStepsBetween = `
SELECT seq, message FROM turn_steps
WHERE tenant_id = $1 AND job_id = $2 AND seq >= $3 AND seq < $4
ORDER BY seq`

	// sqlReplaceStep swaps a step's message while its content is still
	// the one the caller read.
	sqlReplaceStep = `
UPDATE turn_steps SET message = $5
WHERE tenant_id = $1 AND job_id = $2 AND seq = $3 AND message->>'content' = $4`
)

// PutStep stores message seq of a turn's conversation. Idempotent: a retry
// with the same seq does nothing and the first write stands, so a replayed
// activity cannot rewrite what the model already saw. The turn must have
// been begun (agent.CodeNotFound otherwise).
func (s *Store) PutStep(ctx context.Context, tenantID, jobID string, seq int, m agent.Message) error {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return err
	}
	if seq < 0 {
		return agent.Errorf(agent.CodeInvalid, "step seq must not be negative, got %d", seq)
	}
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("put step %d of turn %q: encode: %w", seq, jobID, err)
	}
	if _, err := s.pool.Exec(ctx, sqlInsertStep, tenantID, jobID, seq, msg); err != nil {
		if pgCode(err) == pgForeignKeyViolation {
			return agent.Errorf(agent.CodeNotFound, "turn %q of tenant %q not found: begin it before storing steps", jobID, tenantID)
		}
		return fmt.Errorf("put step %d of turn %q: %w", seq, jobID, err)
	}
	return nil
}

// ReplaceStep stores m as message seq of a turn in place of the message
// whose content is prev, and reports whether it did: false when the step
// holds another message (another attempt replaced it first) or none.
// It is the one way a stored step changes, for a call whose outcome was
// unknown and that a person decided on sending again, before the model
// read it.
func (s *Store) ReplaceStep(ctx context.Context, tenantID, jobID string, seq int, prev string, m agent.Message) (bool, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return false, err
	}
	msg, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("replace step %d of turn %q: encode: %w", seq, jobID, err)
	}
	tag, err := s.pool.Exec(ctx, sqlReplaceStep, tenantID, jobID, seq, prev, msg)
	if err != nil {
		return false, fmt.Errorf("replace step %d of turn %q: %w", seq, jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Steps returns a turn's messages ordered by seq; none for an unknown turn.
func (s *Store) Steps(ctx context.Context, tenantID, jobID string) ([]agent.Message, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	msgs, err := collect(ctx, s.pool, scanMessage, sqlSteps, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("load steps of turn %q: %w", jobID, err)
	}
	return msgs, nil
}

// Step is a stored step of a turn: its message, at its seq.
type Step struct {
	Seq int
	agent.Message
}

// StepsBetween returns a turn's steps from seq from up to (not
// including) seq to, in order: what a model call reads of a long turn
// without reading all of it (the primary key's index serves the range).
func (s *Store) StepsBetween(ctx context.Context, tenantID, jobID string, from, to int) ([]Step, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	steps, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (Step, error) {
		var st Step
		var raw []byte
		if err := row.Scan(&st.Seq, &raw); err != nil {
			return Step{}, err
		}
		if err := json.Unmarshal(raw, &st.Message); err != nil {
			return Step{}, fmt.Errorf("decode message: %w", err)
		}
		return st, nil
	}, sqlStepsBetween, tenantID, jobID, from, to)
	if err != nil {
		return nil, fmt.Errorf("load steps %d to %d of turn %q: %w", from, to, jobID, err)
	}
	return steps, nil
}

// Step returns message seq of a turn; agent.CodeNotFound when it has not
// been stored.
func (s *Store) Step(ctx context.Context, tenantID, jobID string, seq int) (agent.Message, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return agent.Message{}, err
	}
	m, err := collectOne(ctx, s.pool, scanMessage, sqlStep, tenantID, jobID, seq)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "step %d of turn %q not found", seq, jobID), "load step %d of turn %q", seq, jobID); err != nil {
		return agent.Message{}, err
	}
	return m, nil
}

func scanMessage(row pgx.CollectableRow) (agent.Message, error) {
	var raw []byte
	if err := row.Scan(&raw); err != nil {
		return agent.Message{}, err
	}
	var m agent.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return agent.Message{}, fmt.Errorf("decode message: %w", err)
	}
	return m, nil
}

func requireJobKey(tenantID, jobID string) error {
	if err := requireID("tenant_id", tenantID); err != nil {
		return err
	}
	return requireJobID(jobID)
}

// maxJobIDLength matches Temporal's default limit on workflow ids, which a
// job id defaults to.
const maxJobIDLength = 1000

// requireJobID is looser than agent.ValidateID: a job id defaults to the
// workflow id, which may contain slashes ("turn/<tenant>/<job>").
func requireJobID(jobID string) error {
	switch {
	case jobID == "":
		return agent.Errorf(agent.CodeInvalid, "job_id is required")
	case len(jobID) > maxJobIDLength:
		return agent.Errorf(agent.CodeInvalid, "job_id is %d characters; the limit is %d", len(jobID), maxJobIDLength)
	case !utf8.ValidString(jobID) || strings.ContainsRune(jobID, 0):
		return agent.Errorf(agent.CodeInvalid, "job_id must be valid UTF-8 without NUL characters")
	}
	return nil
}
