package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// BuildSignals are what the turns one worker build finished say of it,
// for a rollout to compare the build it ramps with the current one.
type BuildSignals struct {
	Build string `json:"build"`
	// Turns finished since the window began; Failed those that ended
	// failed (not rejected or cancelled: those are the caller's);
	// GuardTrips those a guardrail stopped; Tokens the tokens they used.
	Turns      int `json:"turns"`
	Failed     int `json:"failed"`
	GuardTrips int `json:"guard_trips"`
	Tokens     int `json:"tokens"`
}

// ErrorRate is the share of the turns that failed; 0 with no turns.
func (b BuildSignals) ErrorRate() float64 { return ratio(b.Failed, b.Turns) }

// GuardRate is the share of the turns a guardrail stopped.
func (b BuildSignals) GuardRate() float64 { return ratio(b.GuardTrips, b.Turns) }

// TokensPerTurn is the tokens a turn used on average.
func (b BuildSignals) TokensPerTurn() float64 { return ratio(b.Tokens, b.Turns) }

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// Evaluation turns (channel eval) are left out of a build's live
// signals: they run a dataset, not users' traffic. A guardrail's trip is
// the error type a turn it stopped records.
const sqlBuildSignals = `
SELECT count(*),
       count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE error ->> 'type' = $3),
       coalesce(sum(tokens_used), 0)
FROM agent_results
WHERE build_id = $1 AND created_at >= $2 AND channel <> $4`

// BuildSignals reads the signals of the turns build finished since the
// given time, across tenants: a build is the operator's.
func (s *Store) BuildSignals(ctx context.Context, build string, since time.Time) (BuildSignals, error) {
	if build == "" {
		return BuildSignals{}, agent.Errorf(agent.CodeInvalid, "build signals: a build is required")
	}
	b := BuildSignals{Build: build}
	if err := s.pool.QueryRow(ctx, sqlBuildSignals, build, since, agent.ErrTypeGuardrailTripped, agent.ChannelEval).Scan(&b.Turns, &b.Failed, &b.GuardTrips, &b.Tokens); err != nil {
		return BuildSignals{}, fmt.Errorf("build signals %q: %w", build, err)
	}
	return b, nil
}
