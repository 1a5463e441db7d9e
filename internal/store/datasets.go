package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

const (
	// sqlRecordings are a tenant's completed turns of one agent in a time
	// range, oldest first, with their last step; an evaluation's own
	// turns are never recordings, nor the turns they delegated to (a
	// child's parent is named by its workflow id, turn/<tenant>/<job>).
	sqlRecordings = `
SELECT r.job_id, t.workflow_id, COALESCE((SELECT max(seq) FROM turn_steps s WHERE s.tenant_id = r.tenant_id AND s.job_id = r.job_id), 0)
FROM agent_results r
JOIN turns t ON t.tenant_id = r.tenant_id AND t.job_id = r.job_id
WHERE r.tenant_id = $1 AND r.agent_id = $2 AND r.created_at >= $3 AND r.created_at < $4
  AND r.channel <> 'eval' AND ($5 = '' OR r.channel = $5) AND ($6 = '' OR r.status = $6)
  AND NOT EXISTS (
    SELECT 1 FROM agent_results p
    WHERE t.request ? 'parent' AND p.tenant_id = r.tenant_id AND p.channel = 'eval'
      AND p.job_id = substr(t.request->'parent'->>'workflow_id', length('turn/' || r.tenant_id || '/') + 1))
ORDER BY r.created_at, r.job_id`

	sqlPutDataset = `
INSERT INTO eval_datasets (tenant_id, dataset_id, agent_id, selection, dataset, cases)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, dataset_id) DO NOTHING`

	sqlDataset = `SELECT dataset FROM eval_datasets WHERE tenant_id = $1 AND dataset_id = $2`

	// sqlHistoryBefore is a session's messages before the first one a
	// job appended, newest first.
	sqlHistoryBefore = `
SELECT message FROM session_messages
WHERE tenant_id = $1 AND session_id = $2
  AND seq < COALESCE((SELECT min(seq) FROM session_messages WHERE tenant_id = $1 AND session_id = $2 AND job_id = $3), 9223372036854775807)
ORDER BY seq DESC LIMIT $4`
)

// Recordings are the tenant's recorded turns a selection takes: sampled
// by job id (agent.SampledIn), oldest first, at most its limit.
func (s *Store) Recordings(ctx context.Context, tenantID string, sel agent.RecordSelection) ([]agent.Recording, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	limit := cmp.Or(sel.Limit, agent.MaxRecordCases)
	rows, err := s.pool.Query(ctx, sqlRecordings, tenantID, sel.AgentID, sel.From, sel.To, sel.Channel, sel.Outcome)
	if err != nil {
		return nil, fmt.Errorf("select recordings: %w", err)
	}
	defer rows.Close()
	var out []agent.Recording
	for rows.Next() && len(out) < limit {
		var r agent.Recording
		if err := rows.Scan(&r.JobID, &r.WorkflowID, &r.ToStep); err != nil {
			return nil, fmt.Errorf("select recordings: %w", err)
		}
		if agent.SampledIn(r.JobID, sel.SampleRate) {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select recordings: %w", err)
	}
	return out, nil
}

// PutDataset stores a dataset made by sel under id, once: a dataset
// already stored under the id is left as it is and returned, so a
// retried call answers what the first stored.
func (s *Store) PutDataset(ctx context.Context, tenantID, id string, sel agent.RecordSelection, d agent.EvalDataset) (agent.EvalDataset, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return agent.EvalDataset{}, err
	}
	selJSON, err := json.Marshal(sel)
	if err != nil {
		return agent.EvalDataset{}, err
	}
	dJSON, err := json.Marshal(d)
	if err != nil {
		return agent.EvalDataset{}, err
	}
	if _, err := s.pool.Exec(ctx, sqlPutDataset, tenantID, id, sel.AgentID, selJSON, dJSON, len(d.Cases)); err != nil {
		return agent.EvalDataset{}, fmt.Errorf("store dataset %q: %w", id, err)
	}
	return s.Dataset(ctx, tenantID, id)
}

// Dataset reads one of the tenant's stored datasets.
func (s *Store) Dataset(ctx context.Context, tenantID, id string) (agent.EvalDataset, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, sqlDataset, tenantID, id).Scan(&raw)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "dataset %q not found", id), "load dataset %q", id); err != nil {
		return agent.EvalDataset{}, err
	}
	var d agent.EvalDataset
	if err := json.Unmarshal(raw, &d); err != nil {
		return agent.EvalDataset{}, fmt.Errorf("load dataset %q: %w", id, err)
	}
	return d, nil
}

// RecordedTurn is what the store keeps of a turn, as a replay reads it:
// the stored (so redacted, where the tenant redacts) text, never another
// source.
type RecordedTurn struct {
	// Steps are the turn's steps in the recording's range.
	Steps []agent.Message
	// History is the session's conversation before the turn (user and
	// assistant messages with text), oldest first.
	History []agent.Message
	Result  agent.TurnResult
}

// Prompt is the recorded prompt: the range's first step.
func (r RecordedTurn) Prompt() string {
	if len(r.Steps) == 0 {
		return ""
	}
	return r.Steps[0].Content
}

// maxReplayHistory bounds the history a replay takes of a session.
const maxReplayHistory = 50

// RecordedTurn reads one of the tenant's recorded turns, its steps in
// rec's range: a job of another tenant is not found.
func (s *Store) RecordedTurn(ctx context.Context, tenantID string, rec agent.Recording) (RecordedTurn, error) {
	turn, err := s.Turn(ctx, tenantID, rec.JobID)
	if err != nil {
		return RecordedTurn{}, err
	}
	steps, err := s.StepsBetween(ctx, tenantID, rec.JobID, rec.FromStep, rec.ToStep+1)
	if err != nil {
		return RecordedTurn{}, err
	}
	var out RecordedTurn
	for _, st := range steps {
		out.Steps = append(out.Steps, st.Message)
	}
	if len(out.Steps) == 0 || out.Steps[0].Role != agent.RoleUser {
		return RecordedTurn{}, agent.Errorf(agent.CodeInvalid, "recording %q: step %d is not a prompt", rec.JobID, rec.FromStep)
	}
	if out.Result, err = s.Result(ctx, tenantID, rec.JobID); err != nil {
		return RecordedTurn{}, err
	}
	if turn.SessionID != "" {
		msgs, err := collect(ctx, s.pool, scanMessage, sqlHistoryBefore, tenantID, turn.SessionID, rec.JobID, maxReplayHistory)
		if err != nil {
			return RecordedTurn{}, fmt.Errorf("load the history of recording %q: %w", rec.JobID, err)
		}
		slices.Reverse(msgs)
		for _, m := range msgs {
			if (m.Role == agent.RoleUser || m.Role == agent.RoleAssistant) && strings.TrimSpace(m.Content) != "" {
				out.History = append(out.History, agent.Message{Role: m.Role, Content: m.Content})
			}
		}
	}
	return out, nil
}
