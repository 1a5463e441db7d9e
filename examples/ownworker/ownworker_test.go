package ownworker_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/examples/ownworker"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// script is the model: it asks the weather tool, answers from what it
// returned, and once sends arguments the tool's schema does not take.
const script = `
rules:
  - name: answer
    when: {tool: '"temp_c":22'}
    reply: {text: 'It is 22 °C and sunny in Lisbon.'}
  - name: told-off
    when: {tool: '^error: weather: arguments'}
    reply: {text: 'I asked the wrong way.'}
  - name: ask
    when: {user: 'Lisbon'}
    reply: {tool_calls: [{name: weather, arguments: '{"city": "Lisbon"}'}]}
  - name: vague
    when: {user: 'Porto'}
    reply: {text: 'It is 19 and cloudy in Porto.'}
  - name: ask-badly
    when: {user: 'Oslo'}
    reply: {tool_calls: [{name: weather, arguments: '{"town": "Oslo"}'}]}
`

// TestOwnWorker runs the example's worker options on agentflow's runtime:
// the Go function is a tool whose schema the model is shown and whose
// arguments are checked, and the guard hook refuses a model call.
func TestOwnWorker(t *testing.T) {
	catalog, err := os.ReadFile("catalog.yaml")
	require.NoError(t, err)
	o := ownworker.Options()
	// A hook of the test's own beside the example's: each turn's end.
	// (A store retried runs it again: the channel never blocks the turn.)
	ended := make(chan agentflow.Turn, 10)
	audit := agentflow.Hook{Name: "audit", TurnEnd: func(_ context.Context, t *agentflow.Turn) {
		select {
		case ended <- *t:
		default:
		}
	}}
	srv := testserver.Start(t, testserver.Options{Script: script, Catalogs: []string{string(catalog)}, ToolKinds: o.Tools,
		Hooks: append(o.Hooks, audit), Scorers: o.Scorers})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turn := func(prompt string) agent.TurnResult {
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: prompt, JobID: "own-" + testserver.RandomID()}
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		return res
	}

	res := turn("What is the weather in Lisbon?")
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "It is 22 °C and sunny in Lisbon.", res.Output)
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, "weather", res.Metadata.ToolCalls[0].Tool)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	first := srv.Model.Requests()[0]
	require.Contains(t, first.ToolsJSON, `"city"`, "the schema is made from the Go type")
	require.Contains(t, first.ToolsJSON, "the city, e.g. Lisbon")

	res = turn("And in Oslo?")
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "I asked the wrong way.", res.Output, "arguments the schema refuses go back to the model")
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)

	before := len(srv.Model.Requests())
	res = turn("My card is 4111 1111 1111 1111: will it rain in Lisbon?")
	require.Equal(t, agent.StatusFailed, res.Status)
	require.Equal(t, agent.ErrTypeGuardrailTripped, res.Error.Type)
	require.Contains(t, res.Error.Message, "card number")
	for _, r := range srv.Model.Requests()[before:] {
		for _, m := range r.Messages {
			require.False(t, strings.Contains(m.Content, "4111"), "the model never saw the card number")
		}
	}
	require.Len(t, srv.Model.Requests(), before, "no model call was made")

	for _, status := range []string{agent.StatusCompleted, agent.StatusCompleted, agent.StatusFailed} {
		got := <-ended
		require.Equal(t, "demo", got.TenantID)
		require.Equal(t, "forecaster", got.AgentID)
		require.Equal(t, status, got.Result.Status, "a hook sees each turn's end, as stored")
	}

	evaluate(ctx, t, srv)
}

// evaluate runs an evaluation on the example's worker: the scorer checks
// every answer that gives a temperature, and says nothing of one that
// gives none.
func evaluate(ctx context.Context, t *testing.T, srv *testserver.Server) {
	completed := agent.EvalExpect{Status: agent.StatusCompleted}
	in := agent.EvalInput{TenantID: "demo", EvalID: "units-" + testserver.RandomID(), AgentID: "forecaster", Versions: []int{1}, Concurrency: 1,
		Dataset: agent.EvalDataset{Name: "weather", Cases: []agent.EvalCase{
			{ID: "lisbon", Expect: completed, Prompt: "What is the weather in Lisbon?"},
			{ID: "porto", Expect: completed, Prompt: "What is the weather in Porto?"},
			{ID: "oslo", Expect: completed, Prompt: "And in Oslo?"},
		}}}
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.EvalWorkflowID(in.TenantID, in.EvalID), TaskQueue: srv.TaskQueue},
		contract.Evaluation, in)
	require.NoError(t, err)
	var done agent.EvalRun
	require.NoError(t, run.Get(ctx, &done))
	stored, err := srv.Store().EvalRun(ctx, in.TenantID, in.EvalID)
	require.NoError(t, err)
	require.Len(t, stored.Cases, 3)
	checks := map[string][]agent.EvalCheck{}
	for _, c := range stored.Cases {
		for _, ch := range c.Checks {
			if ch.Name == "units-stated" {
				checks[c.CaseID] = append(checks[c.CaseID], ch)
			}
		}
	}
	require.Equal(t, map[string][]agent.EvalCheck{
		"lisbon": {{Name: "units-stated", Passed: true}},
		"porto":  {{Name: "units-stated", Passed: false, Detail: "the answer gives 19 without a unit"}},
	}, checks, "the scorer checks answers with a temperature, and only those")
	require.Equal(t, []agent.EvalTotals{{Version: 1, Cases: 3, Passed: 2, Tokens: done.Totals[0].Tokens,
		LatencyP50MS: done.Totals[0].LatencyP50MS, LatencyMaxMS: done.Totals[0].LatencyMaxMS}}, done.Totals,
		"a scorer's failed check fails its case")
}
