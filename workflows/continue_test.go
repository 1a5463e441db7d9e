package workflows

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestTurnContinuesAsNew runs a turn of many steps whose server suggests
// continuing as new (the test environment counts no history): each run hands the turn on at a step boundary with what the next
// needs, and the turn, run after run, makes every call once, keeps its
// steps, usage and tool records, and logs one event log whose indices go
// on from run to run.
func TestTurnContinuesAsNew(t *testing.T) {
	const calls = 12
	ag := testAgent()
	ag.Limits.MaxIterations = calls + 1
	var replies []contract.CallModelResult
	for i := range calls {
		replies = append(replies, toolReply(calc(fmt.Sprintf("c%d", i), "1+1")))
	}
	f := &fakeTurn{agent: ag, replies: append(replies, textReply("done")),
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}

	req := request()
	var carried *contract.TurnCarry
	var res agent.TurnResult
	runs := 0
	for ; runs < 3*calls; runs++ {
		env := newEnv(t, f)
		env.SetContinueAsNewSuggested(true)
		env.ExecuteWorkflow(contract.AgentTurn, req, carried)
		require.True(t, env.IsWorkflowCompleted())
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			require.NoError(t, err)
			require.NoError(t, env.GetWorkflowResult(&res))
			break
		}
		require.Equal(t, contract.AgentTurn, can.WorkflowType.Name)
		var next agent.TurnRequest
		carried = nil
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next, &carried))
		require.Equal(t, req.JobID, next.JobID, "the next run is the same turn")
		require.NotNil(t, carried)
		require.Equal(t, runs+1, carried.Run)
		require.Equal(t, ag.ID, carried.Agent.ID, "the next run keeps the pinned agent")
		require.Equal(t, carried.Iteration*2, carried.Seq, "every step so far is carried: a model call and its tool call each")
		require.Len(t, carried.Calls, carried.Iteration)
		require.NotEmpty(t, carried.Stream.Log, "the log's tail is handed on")
		require.Greater(t, carried.Stream.NextIndex, int64(len(carried.Stream.Log)))
		req = next
	}
	require.Equal(t, calls, runs, "each run makes one step, then hands the turn on: the last answers")
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "done", res.Output)
	require.Len(t, res.Metadata.ToolCalls, calls, "one result lists every call of every run")
	require.Equal(t, calls*10+7, res.Metadata.TokensUsed)
	require.Len(t, f.toolCalls, calls, "each call made once")
	require.Len(t, f.modelCalls, calls+1, "no model call made twice")
	require.Len(t, f.saved, 1, "one result stored")
	for i, in := range f.modelCalls {
		require.Equal(t, 2*i+1, in.Seq, "model call %d's step follows on from the last run's", i)
		if i > 0 {
			require.Greater(t, in.FirstIndex, f.modelCalls[i-1].FirstIndex, "the log's indices go on: call %d starts after call %d", i, i-1)
		}
	}
}

// TestContextWindow: a model call reads its turn's recent steps whole —
// at least KeepRecentSteps, fewer than twice as many — and the 2×
// KeepRecentSteps before them as a digest; the window moves a block at a
// time, and what the turn keeps of its steps stays bounded.
func TestContextWindow(t *testing.T) {
	p := agent.ContextPolicy{KeepRecentSteps: 3}
	var c turnContext
	type window struct{ whole, digest int }
	var got []window
	for step := range 12 {
		w, d := c.window(p)
		got = append(got, window{w, d})
		// Each step is a model reply and one tool result: 2 seqs, from 1.
		c.started(1+2*step, p)
		require.LessOrEqual(t, len(c.starts), 12)
	}
	require.Equal(t, []window{
		{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, // fewer than 2×3 steps: all whole
		{7, 1}, {7, 1}, {7, 1}, // 6 to 8 steps: steps 4 on (seq 7) whole, 1–3 in the digest
		{13, 1}, {13, 1}, {13, 1}, // 9 to 11: steps 7 on (seq 13) whole, 1–6 in the digest
	}, got)
	w, d := c.window(p)
	require.Equal(t, window{19, 7}, window{w, d}, "12 steps: steps 10 on whole, 4–9 in the digest, 1–3 counted")
	w, d = c.window(agent.ContextPolicy{KeepRecentSteps: 3, Compaction: agent.CompactionNone})
	require.Equal(t, window{0, 0}, window{w, d}, "compaction none: every step whole")
}

// TestResultListsTheLatestCalls: a turn keeps, carries and lists at most
// agent.MaxResultToolCalls tool records, the latest, and counts the rest.
func TestResultListsTheLatestCalls(t *testing.T) {
	var tr toolRecords
	for i := range agent.MaxResultToolCalls + 5 {
		tr.forget(1)
		tr.calls = append(tr.calls, agent.ToolCallRecord{CallID: fmt.Sprint(i)})
	}
	require.Len(t, tr.calls, agent.MaxResultToolCalls)
	require.Equal(t, 5, tr.omitted)
	require.Equal(t, "5", tr.calls[0].CallID)
	tr.forget(3000)
	require.Empty(t, tr.calls, "a round larger than the list makes room for itself")
	require.Equal(t, agent.MaxResultToolCalls+5, tr.omitted)
}
