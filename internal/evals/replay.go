package evals

import (
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// ScoreReplay compares a replayed turn with its recording: answer
// agreement (the answers, trimmed, are equal) and tool-call agreement
// (agent.MatchCalls of the calls each turn's model asked for; a replayed
// call that matches none is a divergence). It returns the comparison and
// its two checks, and whether a guardrail stopped either turn; cost and
// latency are the caller's to add.
func ScoreReplay(recorded agent.TurnResult, recordedSteps []agent.Message, replayed agent.TurnResult, replayedSteps []agent.Message) (agent.ReplayScore, []agent.EvalCheck) {
	s := agent.ReplayScore{RecordedJobID: recorded.JobID, RecordedAnswer: words.Clip(recorded.Output, 4<<10),
		RecordedCalls: canonicalCalls(agent.AskedCalls(recordedSteps)), ReplayedCalls: canonicalCalls(agent.AskedCalls(replayedSteps))}
	s.AnswerAgrees = strings.TrimSpace(recorded.Output) == strings.TrimSpace(replayed.Output)
	tripped := func(r agent.TurnResult) bool { return r.Error != nil && r.Error.Type == agent.ErrTypeGuardrailTripped }
	s.GuardTripped, s.RecordedGuardTripped = tripped(replayed), tripped(recorded)
	for _, m := range agent.MatchCalls(s.RecordedCalls, s.ReplayedCalls) {
		if m < 0 {
			s.Divergences++
		} else {
			s.Matched++
		}
	}
	answer := agent.EvalCheck{Name: "replay answer", Passed: s.AnswerAgrees}
	if !answer.Passed {
		answer.Detail = fmt.Sprintf("answered %q; the recording answered %q", words.Clip(replayed.Output, 200), words.Clip(recorded.Output, 200))
	}
	calls := agent.EvalCheck{Name: "replay tool calls", Passed: s.ToolAgreement() == 1}
	if !calls.Passed {
		calls.Detail = fmt.Sprintf("%s: the turn called %s; the recording called %s", s, callList(s.ReplayedCalls), callList(s.RecordedCalls))
	}
	return s, []agent.EvalCheck{answer, calls}
}

// canonicalCalls are calls as a report shows them: tool and canonical
// arguments, without the model's call ids.
func canonicalCalls(calls []agent.ToolCall) []agent.ToolCall {
	out := make([]agent.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = agent.ToolCall{Name: c.Name, Arguments: agent.CanonicalArgs(c.Arguments)}
	}
	return out
}

func callList(calls []agent.ToolCall) string {
	if len(calls) == 0 {
		return "no tool"
	}
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = c.Name + c.Arguments
	}
	return strings.Join(parts, ", ")
}
