package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// The list of a tenant's recent turns (GET /v1/turns): one row a turn,
// newest first, with its outcome and what it cost. The page is walked on
// an index of turns — turns_tenant_created, or turns_agent_recent_idx
// when an agent is named — in created_at order, and each row's sums are
// LATERAL reads of its own job's rows on the primary keys of usage_ledger
// and turn_steps, so a page costs its rows, not the tenant's history.

// MaxTurnRows bounds a page of TurnList.
const MaxTurnRows = 200

// StatusRunning is the status of a turn that has no result yet.
const StatusRunning = "running"

// TurnCursor is where a page of TurnList ends: the last row's start and
// job, the page after begins strictly after it.
type TurnCursor struct {
	CreatedAt time.Time
	JobID     string
}

// TurnFilter selects a tenant's turns for TurnList. Every field but
// TenantID and Limit is optional: the zero value keeps every turn.
type TurnFilter struct {
	TenantID  string
	AgentID   string
	Status    string // running, or a result's status (agent_results.status)
	Channel   string // the request's channel
	SessionID string
	// Since (included) and Until (excluded) bound the turns' starts.
	Since, Until time.Time
	// MinCost keeps turns whose model calls cost at least this (USD); 0
	// keeps all.
	MinCost float64
	// Limit is the page's size: 1 to MaxTurnRows.
	Limit int
	// Before, when set, is the cursor of the previous page.
	Before *TurnCursor
	// HideJobPrefixes leaves out the turns whose job id begins with one of
	// them (a person's turns, for a caller who is not staff).
	HideJobPrefixes []string
}

// TurnRow is a turn as the list shows it.
type TurnRow struct {
	JobID        string
	WorkflowID   string
	AgentID      string
	AgentVersion int
	SessionID    string
	Channel      string
	Status       string
	Prompt       string
	StartedAt    time.Time
	EndedAt      *time.Time // nil while running
	// ModelCalls counts the job's chat rows of usage_ledger (each attempt
	// of each step); the tokens and cost are summed over all its rows.
	ModelCalls   int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	// ToolCalls counts the tool messages among the turn's steps (one per
	// call answered, a program's calls included): the same count for a
	// turn still running as for one that ended.
	ToolCalls int
}

const sqlTurnList = `
SELECT t.job_id, t.workflow_id, t.agent_id, t.agent_version, t.session_id,
  coalesce(t.request->>'channel', ''), coalesce(r.status, 'running'), coalesce(t.request->>'prompt', ''),
  t.created_at, r.completed_at, u.calls, u.input_tokens, u.output_tokens, u.cost, st.tools
FROM turns t
LEFT JOIN agent_results r ON r.tenant_id = t.tenant_id AND r.job_id = t.job_id
CROSS JOIN LATERAL (
  SELECT count(*) FILTER (WHERE l.kind = 'chat') AS calls,
    coalesce(sum(l.input_tokens), 0) AS input_tokens, coalesce(sum(l.output_tokens), 0) AS output_tokens,
    coalesce(sum(l.cost), 0)::float8 AS cost
  FROM usage_ledger l WHERE l.tenant_id = t.tenant_id AND l.job_id = t.job_id
) u
CROSS JOIN LATERAL (
  SELECT count(*) AS tools FROM turn_steps s
  WHERE s.tenant_id = t.tenant_id AND s.job_id = t.job_id AND s.message->>'role' = 'tool'
) st
WHERE %s
ORDER BY t.created_at DESC, t.job_id DESC
LIMIT %d`

// TurnList is a page of f.TenantID's turns f selects, newest first
// (started, then job id, descending).
func (s *Store) TurnList(ctx context.Context, f TurnFilter) ([]TurnRow, error) {
	if err := requireID("tenant_id", f.TenantID); err != nil {
		return nil, err
	}
	if f.Limit < 1 || f.Limit > MaxTurnRows {
		return nil, agent.Errorf(agent.CodeInvalid, "limit %d: want 1 to %d", f.Limit, MaxTurnRows)
	}
	where, args := f.where()
	rows, err := s.pool.Query(ctx, fmt.Sprintf(sqlTurnList, where, f.Limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnRow, error) {
		var t TurnRow
		err := row.Scan(&t.JobID, &t.WorkflowID, &t.AgentID, &t.AgentVersion, &t.SessionID, &t.Channel, &t.Status, &t.Prompt,
			&t.StartedAt, &t.EndedAt, &t.ModelCalls, &t.InputTokens, &t.OutputTokens, &t.CostUSD, &t.ToolCalls)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	return out, nil
}

// where is the filter's WHERE clause and its arguments: only the
// conditions the filter sets, so that the planner sees plain equalities
// and ranges on the indexed columns, not "$n is empty OR …" that hides them.
func (f TurnFilter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, vals ...any) {
		for _, v := range vals {
			args = append(args, v)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		conds = append(conds, cond)
	}
	add("t.tenant_id = ?", f.TenantID)
	if f.AgentID != "" {
		add("t.agent_id = ?", f.AgentID)
	}
	switch f.Status {
	case "":
	case StatusRunning:
		conds = append(conds, "r.job_id IS NULL")
	default:
		add("r.status = ?", f.Status)
	}
	if f.Channel != "" {
		add("t.request->>'channel' = ?", f.Channel)
	}
	if f.SessionID != "" {
		add("t.session_id = ?", f.SessionID)
	}
	if !f.Since.IsZero() {
		add("t.created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		add("t.created_at < ?", f.Until)
	}
	if f.MinCost > 0 {
		add("u.cost >= ?", f.MinCost)
	}
	for _, p := range f.HideJobPrefixes {
		add("left(t.job_id, ?) <> ?", len(p), p)
	}
	if b := f.Before; b != nil {
		add("(t.created_at, t.job_id) < (?, ?)", b.CreatedAt, b.JobID)
	}
	return strings.Join(conds, " AND "), args
}
