package evals

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func replaySteps(calls ...agent.ToolCall) []agent.Message {
	return []agent.Message{{Role: agent.RoleUser, Content: "q"}, {Role: agent.RoleAssistant, ToolCalls: calls}}
}

// TestScoreReplay: answer agreement is exact (trimmed); tool-call
// agreement is matched calls over the larger count, each unmatched
// replayed call a divergence; the report shows the totals and a diff of
// each replay that differs, and none of one that agrees.
func TestScoreReplay(t *testing.T) {
	rec := agent.TurnResult{JobID: "live-1", Status: agent.StatusCompleted, Output: "The result is 42."}
	calc := agent.ToolCall{ID: "c1", Name: "calc", Arguments: `{"x": "6*7"}`}
	s, checks := ScoreReplay(rec, replaySteps(calc), agent.TurnResult{Output: " The result is 42.\n"},
		replaySteps(agent.ToolCall{ID: "other-id", Name: "calc", Arguments: `{"x":"6*7"}`}))
	require.True(t, s.AnswerAgrees)
	require.Equal(t, 1, s.Matched)
	require.Zero(t, s.Divergences)
	require.Equal(t, 1.0, s.ToolAgreement())
	require.True(t, checks[0].Passed && checks[1].Passed)

	require.False(t, s.GuardTripped || s.RecordedGuardTripped)

	bad, checks := ScoreReplay(rec, replaySteps(calc), agent.TurnResult{Output: "I could not.", Status: agent.StatusFailed,
		Error: &agent.TurnError{Type: agent.ErrTypeGuardrailTripped, Message: "the answer broke a rule"}},
		replaySteps(agent.ToolCall{Name: "calc", Arguments: `{"x":"round(6*7)"}`}, agent.ToolCall{Name: "calc", Arguments: `{"x":"6*7"}`}))
	require.False(t, bad.AnswerAgrees)
	require.Equal(t, 1, bad.Matched)
	require.Equal(t, 1, bad.Divergences)
	require.Equal(t, 0.5, bad.ToolAgreement())
	require.True(t, bad.GuardTripped, "a guardrail stopped the replay")
	require.False(t, bad.RecordedGuardTripped)
	require.False(t, checks[0].Passed)
	require.Contains(t, checks[0].Detail, `answered "I could not."; the recording answered "The result is 42."`)
	require.Contains(t, checks[1].Detail, "tool calls 1 of 2 agree, 1 divergent")

	cases := []agent.EvalCaseResult{
		{CaseID: "a", Version: 1, Passed: true, Output: "The result is 42.", Replay: &s},
		{CaseID: "a", Version: 2, Output: "I could not.", Replay: &bad, CostUSD: 0.5},
	}
	run := agent.EvalRun{EvalID: "r", Versions: []int{1, 2}, Cases: cases, Totals: agent.TotalsOf([]int{1, 2}, cases)}
	md := Markdown(run)
	require.Contains(t, md, "| v1 | 1 | 1/1 | 100% | 0 |")
	require.Contains(t, md, "| v2 | 1 | 0/1 | 50% | 1 | +0.0000 $ | +0 ms | 1 (0) |", "the replay's guardrail trip, and the recording's")
	require.NotContains(t, md, "### `a` on v1 against recording")
	require.Contains(t, md, "### `a` on v2 against recording `live-1`\n\n```diff\n"+
		"- answer: The result is 42.\n+ answer: I could not.\n"+
		"+ call calc {\"x\":\"round(6*7)\"}\n  call calc {\"x\":\"6*7\"}\n```\n")
	html, err := HTML(run)
	require.NoError(t, err)
	require.Contains(t, html, "1 calls agree, 1 divergent")
	require.Contains(t, html, "<tr><td>v2</td><td>1</td><td>0/1</td><td>50%</td><td>1</td>")

	plain := Markdown(agent.EvalRun{EvalID: "p", Versions: []int{1}, Totals: agent.TotalsOf([]int{1}, nil)})
	require.NotContains(t, plain, "Replay", "a run without recorded cases has no replay section")
}
