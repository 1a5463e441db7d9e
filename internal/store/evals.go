package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

const (
	sqlBeginEval = `
INSERT INTO eval_runs (tenant_id, eval_id, dataset, agent_id, versions, cases, status)
VALUES ($1, $2, $3, $4, $5, $6, 'running')
ON CONFLICT (tenant_id, eval_id) DO NOTHING`

	// sqlPutEvalCase stores a case's result once, and the judge's model
	// call (when $8 names its job) in the usage ledger with it: a retried
	// scoring that finds the result stored adds nothing.
	sqlPutEvalCase = `
WITH c AS (
  INSERT INTO eval_cases (tenant_id, eval_id, case_id, version, ord, result, passed)
  VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (tenant_id, eval_id, case_id, version) DO NOTHING
  RETURNING 1
)
INSERT INTO usage_ledger (tenant_id, job_id, step, attempt, agent_id, agent_version, session_id, model,
  input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, channel)
SELECT $1, $8, 0, $9, $10, $4, '', $11, $12, $13, $14, $15, $16, 'eval' FROM c WHERE $8 <> ''
ON CONFLICT (tenant_id, job_id, step, attempt) DO NOTHING`

	sqlFinishEval = `
UPDATE eval_runs SET status = 'completed', finished_at = COALESCE(finished_at, now())
WHERE tenant_id = $1 AND eval_id = $2`

	sqlEvalRun = `
SELECT dataset, agent_id, versions, status, started_at, finished_at
FROM eval_runs WHERE tenant_id = $1 AND eval_id = $2`

	sqlEvalCases = `
SELECT result FROM eval_cases WHERE tenant_id = $1 AND eval_id = $2 ORDER BY ord, version`
)

// BeginEval records an evaluation as running. Idempotent: a run already
// recorded is left as it is.
func (s *Store) BeginEval(ctx context.Context, in agent.EvalInput) error {
	if err := requireKey(in.TenantID, "eval_id", in.EvalID); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlBeginEval, in.TenantID, in.EvalID, in.Dataset.Name, in.AgentID, in.Versions, len(in.Dataset.Cases)); err != nil {
		return fmt.Errorf("begin evaluation %q: %w", in.EvalID, err)
	}
	return nil
}

// EvalCaseRow is a scored case to store, and the judge's model call if
// one graded it (Judge.JobID empty: none).
type EvalCaseRow struct {
	TenantID, EvalID string
	Ord              int
	Result           agent.EvalCaseResult
	Judge            ModelCall
}

// PutEvalCase stores a case's result on a version, once: the first
// stored stands, so a retried scoring changes nothing.
func (s *Store) PutEvalCase(ctx context.Context, row EvalCaseRow) error {
	r := row.Result
	res, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store case %q of evaluation %q: encode: %w", r.CaseID, row.EvalID, err)
	}
	j := row.Judge
	attempt := max(j.Attempt, 1)
	u := j.Usage
	_, err = s.pool.Exec(ctx, sqlPutEvalCase, row.TenantID, row.EvalID, r.CaseID, r.Version, row.Ord, res, r.Passed,
		j.JobID, attempt, j.AgentID, j.Model, max(u.PromptTokens, 0), max(u.CompletionTokens, 0), max(u.CachedTokens, 0),
		max(u.ReasoningTokens, 0), j.Cost)
	if err != nil {
		if pgCode(err) == pgForeignKeyViolation {
			return agent.Errorf(agent.CodeNotFound, "evaluation %q of tenant %q not found: begin it first", row.EvalID, row.TenantID)
		}
		return fmt.Errorf("store case %q of evaluation %q: %w", r.CaseID, row.EvalID, err)
	}
	return nil
}

// FinishEval marks an evaluation completed.
func (s *Store) FinishEval(ctx context.Context, tenantID, evalID string) error {
	if _, err := s.pool.Exec(ctx, sqlFinishEval, tenantID, evalID); err != nil {
		return fmt.Errorf("finish evaluation %q: %w", evalID, err)
	}
	return nil
}

// EvalRun reads an evaluation with its cases' results (in the dataset's
// order) and totals; another tenant's is CodeNotFound.
func (s *Store) EvalRun(ctx context.Context, tenantID, evalID string) (agent.EvalRun, error) {
	r := agent.EvalRun{TenantID: tenantID, EvalID: evalID}
	var versions []int32
	err := s.pool.QueryRow(ctx, sqlEvalRun, tenantID, evalID).Scan(&r.Dataset, &r.AgentID, &versions, &r.Status, &r.StartedAt, &r.FinishedAt)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "evaluation %q not found", evalID), "load evaluation %q", evalID); err != nil {
		return agent.EvalRun{}, err
	}
	for _, v := range versions {
		r.Versions = append(r.Versions, int(v))
	}
	r.Cases, err = collect(ctx, s.pool, scanJSON[agent.EvalCaseResult], sqlEvalCases, tenantID, evalID)
	if err != nil {
		return agent.EvalRun{}, fmt.Errorf("load cases of evaluation %q: %w", evalID, err)
	}
	r.Totals = agent.TotalsOf(r.Versions, r.Cases)
	return r, nil
}
