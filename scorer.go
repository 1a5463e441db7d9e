package agentflow

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/evals"
)

// Scorer is a check of your own on every case an evaluation scores: its
// Score reads the case and the turn's result and returns its checks (none
// for a case it has nothing to say about); each is named for the scorer
// in the report. An error fails the scoring attempt, which is retried.
type Scorer = evals.Scorer

// What a scorer reads and returns.
type (
	// EvalCase is a dataset's case: its id, prompt and expectations.
	EvalCase = agent.EvalCase
	// EvalCheck is one check of a case: its name, whether it passed,
	// and why not.
	EvalCheck = agent.EvalCheck
	// TurnResult is a turn's result: its status, answer, tool calls and
	// usage.
	TurnResult = agent.TurnResult
)
