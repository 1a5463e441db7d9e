package evals

import (
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// Scorer is a check of a worker's own on every case its evaluations
// score, beside the dataset's expectations (Score) and a judge: code that
// reads the case and the turn's result — a policy, a format, a business
// rule — and returns its checks. It returns none for a case it has
// nothing to say about (it reads the case's prompt or id to tell). An
// error fails the scoring attempt, which Temporal retries: a scorer that
// calls a service may fail for a while.
type Scorer struct {
	Name  string
	Score func(ctx context.Context, c agent.EvalCase, res agent.TurnResult) ([]agent.EvalCheck, error)
}

// Own runs scorers on a case in order and returns their checks, each
// named for its scorer ("name" or "name: check") so a report tells them
// from the dataset's.
func Own(ctx context.Context, scorers []Scorer, c agent.EvalCase, res agent.TurnResult) ([]agent.EvalCheck, error) {
	var out []agent.EvalCheck
	for _, s := range scorers {
		checks, err := s.Score(ctx, c, res)
		if err != nil {
			return nil, fmt.Errorf("scorer %s: %w", s.Name, err)
		}
		for _, ch := range checks {
			if ch.Name == "" {
				ch.Name = s.Name
			} else {
				ch.Name = s.Name + ": " + ch.Name
			}
			out = append(out, ch)
		}
	}
	return out, nil
}
