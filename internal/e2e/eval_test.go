package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestEvaluationSurvivesWorkerKill: an evaluation started with the
// Temporal client alone (as `temporal workflow start --type Evaluation`
// would) goes on after its worker is killed mid-way: every case is
// scored once, each case's turn ran once, and the run completes with the
// same totals a quiet run has.
func TestEvaluationSurvivesWorkerKill(t *testing.T) {
	p := newProcEnv(t, testScript, testCatalog)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, p.dbURL, store.Options{Logger: zap.NewNop()})
	require.NoError(t, err)
	defer st.Close()

	in := agent.EvalInput{TenantID: "demo", EvalID: "kill-" + testserver.RandomID(), AgentID: "assistant", Versions: []int{1}, Concurrency: 1,
		Dataset: agent.EvalDataset{Name: "slow", Cases: []agent.EvalCase{
			{ID: "a", Prompt: "slowly, what is 6 * 7?", Expect: agent.EvalExpect{ToolCalls: []agent.ExpectedCall{{Tool: "calculator"}},
				Answer: &agent.AnswerExpect{Exact: "The result is 42."}}},
			{ID: "b", Prompt: "slowly, what is 2 + 3?", Expect: agent.EvalExpect{Answer: &agent.AnswerExpect{Regex: `^The result is 5\.$`}}},
			{ID: "c", Prompt: "slowly, what is 1 + 1?", Expect: agent.EvalExpect{Answer: &agent.AnswerExpect{Contains: []string{"3"}}}},
		}}}
	first := p.startWorker()
	run, err := p.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.EvalWorkflowID(in.TenantID, in.EvalID), TaskQueue: p.queue},
		contract.Evaluation, in)
	require.NoError(t, err)

	// Killed once the first case is scored, while the second runs.
	require.Eventually(t, func() bool {
		r, err := st.EvalRun(ctx, in.TenantID, in.EvalID)
		return err == nil && len(r.Cases) == 1
	}, time.Minute, 50*time.Millisecond)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	p.startWorker()

	var totals agent.EvalRun
	require.NoError(t, run.Get(ctx, &totals))
	require.Equal(t, []agent.EvalTotals{{Version: 1, Cases: 3, Passed: 2, Tokens: totals.Totals[0].Tokens,
		LatencyP50MS: totals.Totals[0].LatencyP50MS, LatencyMaxMS: totals.Totals[0].LatencyMaxMS}}, totals.Totals)
	stored, err := st.EvalRun(ctx, in.TenantID, in.EvalID)
	require.NoError(t, err)
	require.Equal(t, agent.EvalCompleted, stored.Status)
	require.Equal(t, totals.Totals, stored.Totals, "the workflow's totals are the store's")
	var ids []string
	for _, c := range stored.Cases {
		ids = append(ids, c.CaseID)
		require.Equal(t, c.CaseID != "c", c.Passed, "%s: %+v", c.CaseID, c.Checks)
		// One ledger row per model call: each case's turn ran once.
		calls, err := st.JobUsage(ctx, in.TenantID, c.JobID)
		require.NoError(t, err)
		require.Len(t, calls, 2, "case %s: a tool call and an answer", c.CaseID)
	}
	require.Equal(t, []string{"a", "b", "c"}, ids, "each case once, in the dataset's order")
	require.Contains(t, stored.Cases[2].Checks[1].Detail, `answered "The result is 2.", which lacks "3"`)

	e := &env{t: t}
	e.replayEvents(testserver.History(ctx, t, p.client, run.GetID(), ""), "evaluation")
}
