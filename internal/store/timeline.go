package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
)

// The reads of a turn's timeline (internal/timeline). Each is keyed by
// (tenant_id, job_id), so another tenant's turn is never found, and each
// is a key lookup or a range of a primary key's index, whatever the
// turn's length; the totals are the one read of the whole turn, a sum
// over its rows.

// TimelineTurn is a turn's row and, once it ended, its result's.
type TimelineTurn struct {
	TenantID     string
	JobID        string
	WorkflowID   string
	AgentID      string
	AgentVersion int
	SessionID    string
	// Request is the turn's request as stored at intake (redacted).
	Request   agent.TurnRequest
	CreatedAt time.Time
	// Outcome is nil while the turn has no stored result.
	Outcome *TurnOutcome
}

// TurnOutcome is what a turn's agent_results row says of its end.
type TurnOutcome struct {
	Status string // completed, failed, rejected or canceled
	Error  *agent.TurnError
	// EndedAt is completed_at (the turn's own clock), or when the row
	// was stored for a result without one.
	EndedAt time.Time
	Channel string
}

// DatedStep is a stored step with when it was stored.
type DatedStep struct {
	Step
	CreatedAt time.Time
}

// TurnTotals sum a whole turn.
type TurnTotals struct {
	// Steps counts the turn's steps; MaxSeq is the last one's seq (-1:
	// none); ToolMessages counts its tool results.
	Steps, MaxSeq, ToolMessages int
	// ModelCalls counts the chat calls whose reply is a step; Retries
	// the attempts before them that failed (sum of attempt - 1).
	ModelCalls, Retries int
	// Usage and CostUSD sum every model call of the turn's job, of
	// every kind (chat, prepare, ...).
	Usage   agent.Usage
	CostUSD float64
	// Approvals counts the calls a person (or a grant) decided.
	Approvals int
}

const (
	sqlTimelineTurn = `
SELECT t.workflow_id, t.agent_id, t.agent_version, t.session_id, t.request, t.created_at,
  r.status, r.error, COALESCE(r.completed_at, r.created_at), r.channel
FROM turns t
LEFT JOIN agent_results r ON r.tenant_id = t.tenant_id AND r.job_id = t.job_id
WHERE t.tenant_id = $1 AND t.job_id = $2`

	sqlDatedSteps = `
SELECT seq, message, created_at FROM turn_steps
WHERE tenant_id = $1 AND job_id = $2 AND seq >= $3 AND seq < $4
ORDER BY seq`

	// sqlAssistantBefore walks the primary key back from $3, at most $4
	// steps, to the reply that asked for the calls of a round.
	sqlAssistantBefore = `
SELECT seq, message, created_at FROM turn_steps
WHERE tenant_id = $1 AND job_id = $2 AND seq < $3 AND seq >= $3 - $4 AND message->>'role' = 'assistant'
ORDER BY seq DESC LIMIT 1`

	// sqlChatCalls are the ledger rows of the replies stored as steps
	// $3 to $4-1: one per step (the attempt that stored it), the last
	// attempt should there be more.
	sqlChatCalls = `
SELECT DISTINCT ON (step) step, attempt, model, input_tokens, output_tokens, cached_tokens, reasoning_tokens,
  cost::float8, created_at, whole_from, digest_from
FROM usage_ledger
WHERE tenant_id = $1 AND job_id = $2 AND step >= $3 AND step < $4 AND kind = 'chat'
ORDER BY step, attempt DESC`

	sqlTurnTotals = `
WITH l AS (
  SELECT count(*) FILTER (WHERE kind = 'chat') AS calls,
    COALESCE(sum(attempt - 1) FILTER (WHERE kind = 'chat'), 0) AS retries,
    COALESCE(sum(input_tokens), 0) AS input, COALESCE(sum(output_tokens), 0) AS output,
    COALESCE(sum(cached_tokens), 0) AS cached, COALESCE(sum(reasoning_tokens), 0) AS reasoning,
    COALESCE(sum(cost), 0)::float8 AS cost
  FROM usage_ledger WHERE tenant_id = $1 AND job_id = $2
), s AS (
  SELECT count(*) AS steps, COALESCE(max(seq), -1) AS max_seq,
    count(*) FILTER (WHERE message->>'role' = 'tool') AS tools
  FROM turn_steps WHERE tenant_id = $1 AND job_id = $2
), a AS (
  SELECT count(DISTINCT call_id) AS approvals FROM approvals WHERE tenant_id = $1 AND job_id = $2
)
SELECT s.steps, s.max_seq, s.tools, l.calls, l.retries, l.input, l.output, l.cached, l.reasoning, l.cost, a.approvals
FROM l, s, a`

	// sqlCallApprovals: a call may have several rows (an approval id
	// each, a resend's decision): the latest decided is the call's.
	sqlCallApprovals = `
SELECT DISTINCT ON (call_id) call_id, tool, outcome, reason, approver, via, requested_at, decided_at, approval_id, grant_id, resend
FROM approvals
WHERE tenant_id = $1 AND job_id = $2 AND call_id = ANY($3)
ORDER BY call_id, decided_at DESC, approval_id DESC`

	// sqlStepEffects are the first deliveries (resend '') of calls.
	sqlStepEffects = `
SELECT seq, attempt, target, state = 'delivered', status, updated_at FROM tool_effects
WHERE tenant_id = $1 AND job_id = $2 AND seq = ANY($3) AND resend = ''`
)

// TimelineTurn returns a turn's row and its result's; agent.CodeNotFound
// when the tenant has no such turn.
func (s *Store) TimelineTurn(ctx context.Context, tenantID, jobID string) (TimelineTurn, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return TimelineTurn{}, err
	}
	t := TimelineTurn{TenantID: tenantID, JobID: jobID}
	var req, errJSON []byte
	var status, channel *string
	var ended *time.Time
	err := s.pool.QueryRow(ctx, sqlTimelineTurn, tenantID, jobID).Scan(&t.WorkflowID, &t.AgentID, &t.AgentVersion, &t.SessionID,
		&req, &t.CreatedAt, &status, &errJSON, &ended, &channel)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "turn %q not found", jobID), "load turn %q", jobID); err != nil {
		return TimelineTurn{}, err
	}
	if err := json.Unmarshal(req, &t.Request); err != nil {
		return TimelineTurn{}, fmt.Errorf("load turn %q: decode request: %w", jobID, err)
	}
	if status == nil {
		return t, nil
	}
	t.Outcome = &TurnOutcome{Status: *status, Channel: *channel}
	if ended != nil {
		t.Outcome.EndedAt = *ended
	}
	if errJSON != nil {
		t.Outcome.Error = &agent.TurnError{}
		if err := json.Unmarshal(errJSON, t.Outcome.Error); err != nil {
			return TimelineTurn{}, fmt.Errorf("load turn %q: decode result error: %w", jobID, err)
		}
	}
	return t, nil
}

// DatedSteps returns a turn's steps from seq from up to (not including)
// seq to, in order, each with when it was stored: a range of the primary
// key's index.
func (s *Store) DatedSteps(ctx context.Context, tenantID, jobID string, from, to int) ([]DatedStep, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	steps, err := collect(ctx, s.pool, scanDatedStep, sqlDatedSteps, tenantID, jobID, from, to)
	if err != nil {
		return nil, fmt.Errorf("load steps %d to %d of turn %q: %w", from, to, jobID, err)
	}
	return steps, nil
}

// AssistantBefore returns the last assistant step before seq before,
// looking back at most within steps: the reply that asked for the calls
// whose results follow it. agent.CodeNotFound when there is none there.
func (s *Store) AssistantBefore(ctx context.Context, tenantID, jobID string, before, within int) (DatedStep, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return DatedStep{}, err
	}
	st, err := collectOne(ctx, s.pool, scanDatedStep, sqlAssistantBefore, tenantID, jobID, before, within)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "no reply of turn %q in the %d steps before %d", jobID, within, before),
		"load the reply before step %d of turn %q", before, jobID); err != nil {
		return DatedStep{}, err
	}
	return st, nil
}

func scanDatedStep(row pgx.CollectableRow) (DatedStep, error) {
	var st DatedStep
	var raw []byte
	if err := row.Scan(&st.Seq, &raw, &st.CreatedAt); err != nil {
		return DatedStep{}, err
	}
	if err := json.Unmarshal(raw, &st.Message); err != nil {
		return DatedStep{}, fmt.Errorf("decode message: %w", err)
	}
	return st, nil
}

// ChatCalls returns the usage ledger's rows of the replies stored as a
// turn's steps from up to (not including) to, by step: one per step.
func (s *Store) ChatCalls(ctx context.Context, tenantID, jobID string, from, to int) ([]ModelCall, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	calls, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (ModelCall, error) {
		c := ModelCall{TenantID: tenantID, JobID: jobID, Kind: KindChat}
		var in, out, cached, reasoning int64
		err := row.Scan(&c.Step, &c.Attempt, &c.Model, &in, &out, &cached, &reasoning, &c.Cost, &c.CreatedAt, &c.WholeFrom, &c.DigestFrom)
		c.Usage = agent.Usage{PromptTokens: int(in), CompletionTokens: int(out), TotalTokens: int(in + out),
			CachedTokens: int(cached), ReasoningTokens: int(reasoning)}
		return c, err
	}, sqlChatCalls, tenantID, jobID, from, to)
	if err != nil {
		return nil, fmt.Errorf("load model calls of steps %d to %d of turn %q: %w", from, to, jobID, err)
	}
	return calls, nil
}

// TurnTotals sums a whole turn: its steps, model calls, retries, tokens,
// cost and approvals, in one statement.
func (s *Store) TurnTotals(ctx context.Context, tenantID, jobID string) (TurnTotals, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return TurnTotals{}, err
	}
	var t TurnTotals
	var in, out, cached, reasoning int64
	err := s.pool.QueryRow(ctx, sqlTurnTotals, tenantID, jobID).Scan(&t.Steps, &t.MaxSeq, &t.ToolMessages, &t.ModelCalls, &t.Retries,
		&in, &out, &cached, &reasoning, &t.CostUSD, &t.Approvals)
	if err != nil {
		return TurnTotals{}, fmt.Errorf("sum turn %q: %w", jobID, err)
	}
	t.Usage = agent.Usage{PromptTokens: int(in), CompletionTokens: int(out), TotalTokens: int(in + out),
		CachedTokens: int(cached), ReasoningTokens: int(reasoning)}
	return t, nil
}

// CallApprovals returns the decisions on a turn's calls callIDs, by call
// id: the latest decided of each (a call sent again after an unknown
// outcome has a second).
func (s *Store) CallApprovals(ctx context.Context, tenantID, jobID string, callIDs []string) (map[string]agent.ApprovalRecord, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	out := map[string]agent.ApprovalRecord{}
	if len(callIDs) == 0 {
		return out, nil
	}
	recs, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.ApprovalRecord, error) {
		r := agent.ApprovalRecord{TenantID: tenantID, JobID: jobID}
		err := row.Scan(&r.CallID, &r.Tool, &r.Outcome, &r.Reason, &r.Approver, &r.Via, &r.RequestedAt, &r.DecidedAt,
			&r.ApprovalID, &r.GrantID, &r.Resend)
		return r, err
	}, sqlCallApprovals, tenantID, jobID, callIDs)
	if err != nil {
		return nil, fmt.Errorf("load approvals of turn %q: %w", jobID, err)
	}
	for _, r := range recs {
		out[r.CallID] = r
	}
	return out, nil
}

// StepEffects returns the side-effects ledger's intents of a turn's
// calls whose results are the steps seqs, by seq: each call's first
// delivery (not a resend's).
func (s *Store) StepEffects(ctx context.Context, tenantID, jobID string, seqs []int) (map[int]effects.Intent, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return nil, err
	}
	out := map[int]effects.Intent{}
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, sqlStepEffects, tenantID, jobID, seqs)
	if err != nil {
		return nil, fmt.Errorf("load tool effects of turn %q: %w", jobID, err)
	}
	var seq int
	var in effects.Intent
	_, err = pgx.ForEachRow(rows, []any{&seq, &in.Attempt, &in.Target, &in.Delivered, &in.Status, &in.At}, func() error {
		out[seq] = in
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load tool effects of turn %q: %w", jobID, err)
	}
	return out, nil
}
