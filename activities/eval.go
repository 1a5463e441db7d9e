package activities

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// maxEvalOutput bounds the answer an evaluation keeps of each case (the
// whole answer is the turn's stored result).
const maxEvalOutput = 4 << 10

// judgeMaxTokens bounds a judge's reply: a verdict and a sentence.
const judgeMaxTokens = 256

// BeginEval records an evaluation as running (idempotent).
func (a *Activities) BeginEval(ctx context.Context, in agent.EvalInput) error {
	return a.store.BeginEval(ctx, in)
}

// PrepareEvalCase stores a case's conversation before its prompt as its
// session's transcript, once (store.AppendSession is idempotent per job).
func (a *Activities) PrepareEvalCase(ctx context.Context, in contract.PrepareEvalCaseInput) error {
	return a.store.AppendSession(ctx, in.TenantID, in.SessionID, in.JobID, in.History)
}

// FinishEval marks an evaluation completed.
func (a *Activities) FinishEval(ctx context.Context, in contract.FinishEvalInput) error {
	return a.store.FinishEval(ctx, in.TenantID, in.EvalID)
}

// ScoreEvalCase scores a case's ended turn (evals.Score; a judge model
// when the case asks for one, its call counted in the usage ledger; the
// worker's own scorers, Deps.Scorers),
// adds the turn's tokens, cost and time, and stores the result once: a
// retry that finds it stored stores nothing more, and the result it
// returns is the one it computed, which the store's first write matches
// but for the judge's wording.
// evalKeepAlive is how often ScoreEvalCase heartbeats: a third of the
// Evaluation's heartbeat timeout.
const evalKeepAlive = 5 * time.Second

func (a *Activities) ScoreEvalCase(ctx context.Context, in contract.ScoreEvalCaseInput) (agent.EvalCaseResult, error) {
	// A judge's model call can outlast the Evaluation's heartbeat timeout.
	defer keepAlive(ctx, evalKeepAlive, nil)()
	res := in.Result
	out := agent.EvalCaseResult{
		CaseID: in.Case.ID, Version: in.Version, JobID: agent.EvalJobID(in.EvalID, in.Case.ID, in.Version), Status: res.Status,
		Checks: evals.Score(in.Case, res), Output: words.Clip(res.Output, maxEvalOutput),
		Tokens: res.Metadata.TokensUsed, LatencyMS: res.Metadata.ExecutionTimeMS,
	}
	calls, err := a.store.JobUsage(ctx, in.TenantID, out.JobID)
	if err != nil {
		return agent.EvalCaseResult{}, err
	}
	for _, c := range calls {
		if c.Cost != nil {
			out.CostUSD += *c.Cost
		}
	}
	if rec := in.Case.Recording; rec != nil {
		// The judge reads the recorded prompt the replay answered.
		if in.Case.Prompt, err = a.scoreReplay(ctx, in, *rec, &out); err != nil {
			return agent.EvalCaseResult{}, err
		}
	}
	row := store.EvalCaseRow{TenantID: in.TenantID, EvalID: in.EvalID, Ord: in.Ord}
	if ans := in.Case.Expect.Answer; ans != nil && ans.Judge != nil {
		check, call, err := a.judge(ctx, in, *ans.Judge)
		if err != nil {
			return agent.EvalCaseResult{}, err
		}
		out.Checks = append(out.Checks, check)
		row.Judge = call
	}
	own, err := evals.Own(ctx, a.scorers, in.Case, res)
	if err != nil {
		return agent.EvalCaseResult{}, err
	}
	out.Checks = append(out.Checks, own...)
	out.Passed = true
	for _, c := range out.Checks {
		out.Passed = out.Passed && c.Passed
	}
	row.Result = out
	if err := a.store.PutEvalCase(ctx, row); err != nil {
		return agent.EvalCaseResult{}, err
	}
	return out, nil
}

// scoreReplay scores a replayed case against its recording: the status
// check wants the recorded status (unless the case names one), and the
// replay's answer and tool calls are compared with the recording's
// (evals.ScoreReplay), with the cost and latency deltas. It returns the
// recorded prompt.
func (a *Activities) scoreReplay(ctx context.Context, in contract.ScoreEvalCaseInput, rec agent.Recording, out *agent.EvalCaseResult) (string, error) {
	recorded, err := a.store.RecordedTurn(ctx, in.TenantID, rec)
	if err != nil {
		return "", fmt.Errorf("read recording %q: %w", rec.JobID, err)
	}
	steps, err := a.store.Steps(ctx, in.TenantID, out.JobID)
	if err != nil {
		return "", err
	}
	c := in.Case
	c.Expect.Status = cmp.Or(c.Expect.Status, recorded.Result.Status)
	score, checks := evals.ScoreReplay(recorded.Result, recorded.Steps, in.Result, steps)
	out.Checks = append(evals.Score(c, in.Result), checks...)
	calls, err := a.store.JobUsage(ctx, in.TenantID, rec.JobID)
	if err != nil {
		return "", err
	}
	for _, c := range calls {
		if c.Cost != nil {
			score.RecordedCostUSD += *c.Cost
		}
	}
	score.RecordedLatencyMS = recorded.Result.Metadata.ExecutionTimeMS
	score.CostDeltaUSD = out.CostUSD - score.RecordedCostUSD
	score.LatencyDeltaMS = out.LatencyMS - score.RecordedLatencyMS
	out.Replay = &score
	return recorded.Prompt(), nil
}

// judge asks a model to grade the case's answer by its rubric: the
// judge's model, else the agent's. A turn that did not complete is not
// judged. The call is returned for the ledger.
func (a *Activities) judge(ctx context.Context, in contract.ScoreEvalCaseInput, j agent.JudgeExpect) (agent.EvalCheck, store.ModelCall, error) {
	if in.Result.Status != agent.StatusCompleted {
		return agent.EvalCheck{Name: "answer judge", Detail: "not judged: the turn did not complete"}, store.ModelCall{}, nil
	}
	model := j.Model
	if model == "" {
		ag, err := a.store.AgentVersion(ctx, in.TenantID, in.AgentID, in.Version)
		if err != nil {
			return agent.EvalCheck{}, store.ModelCall{}, fmt.Errorf("load agent %q version %d: %w", in.AgentID, in.Version, agentNotFound(err))
		}
		model = ag.Model
	}
	resp, err := a.model.Generate(ctx, llm.Request{
		Model: model,
		Messages: []agent.Message{{Role: agent.RoleSystem, Content: evals.JudgeSystem},
			{Role: agent.RoleUser, Content: evals.JudgePrompt(j, in.Case.Prompt, in.Result.Output)}},
		MaxTokens: judgeMaxTokens,
	})
	if err != nil {
		return agent.EvalCheck{}, store.ModelCall{}, modelError(err)
	}
	call := store.ModelCall{TenantID: in.TenantID, JobID: fmt.Sprintf("eval:%s:%s:v%d:judge", in.EvalID, in.Case.ID, in.Version),
		Attempt: int(activity.GetInfo(ctx).Attempt), AgentID: in.AgentID, AgentVersion: in.Version, Model: model, Usage: resp.Usage}
	if settings, err := a.tenants.Settings(ctx, in.TenantID); err == nil {
		if p, ok := agent.PriceOf(settings.Billing.Prices, model); ok {
			cost := p.Cost(resp.Usage)
			call.Cost = &cost
		}
	}
	return evals.ParseVerdict(resp.Message.Content), call, nil
}
