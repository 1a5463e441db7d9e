package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestFailureNamesTheTool: a turn whose timeout interrupts a tool call
// (here one waiting for approval), or that runs out of iterations calling a tool that fails, names the
// call's tool (and the pipeline step that failed it, whether the call
// failed once or after its retries) in its error; a failure in a model
// call names none. Every result says when the turn completed.
func TestFailureNamesTheTool(t *testing.T) {
	failing := func(step string, retried bool) func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
		return func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
			if retried {
				return contract.ExecuteToolResult{}, contract.ToolCallFailed("tool \"calculator\": step 0 ("+step+"): connection refused", step)
			}
			return contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: "error: step 0", Step: step}, nil
		}
	}
	tests := []struct {
		name      string
		limits    agent.Limits
		tool      func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error)
		replies   []contract.CallModelResult
		wantType  string
		wantTool  string
		wantStep  string
		wantSteps []string // the records' steps
	}{
		{
			name: "timeout while a call waits for approval", limits: agent.Limits{MaxIterations: 4, TurnTimeoutSec: 30},
			tool:     okTool("2"),
			replies:  []contract.CallModelResult{needsApproval(toolReply(calc("c1", "1+1")), "c1")},
			wantType: agent.ErrTypeTimeout, wantTool: "calculator", wantSteps: []string{""},
		},
		{
			name: "max iterations on a failing step", limits: agent.Limits{MaxIterations: 2, TurnTimeoutSec: 60},
			tool:     failing("http_request", false),
			replies:  []contract.CallModelResult{toolReply(calc("c", "1+1"))},
			wantType: agent.ErrTypeMaxIterations, wantTool: "calculator", wantStep: "http_request", wantSteps: []string{"http_request", "http_request"},
		},
		{
			name: "max iterations on a step failing after its retries", limits: agent.Limits{MaxIterations: 2, TurnTimeoutSec: 60},
			tool:     failing("table_sort", true),
			replies:  []contract.CallModelResult{toolReply(calc("c", "1+1"))},
			wantType: agent.ErrTypeMaxIterations, wantTool: "calculator", wantStep: "table_sort", wantSteps: []string{"table_sort", "table_sort"},
		},
		{
			name: "max iterations with tools that work", limits: agent.Limits{MaxIterations: 2, TurnTimeoutSec: 60},
			tool:     okTool("2"),
			replies:  []contract.CallModelResult{toolReply(calc("c", "1+1"))},
			wantType: agent.ErrTypeMaxIterations, wantSteps: []string{"", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAgent()
			a.Limits = tt.limits
			f := &fakeTurn{agent: a, replies: tt.replies, tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": tt.tool}}
			env := newEnv(t, f)
			_, failure := runTurn(t, env, request())
			require.NotNil(t, failure)
			var res agent.TurnResult
			require.NoError(t, failure.Details(&res))
			require.Equal(t, tt.wantType, res.Error.Type)
			require.Equal(t, []string{tt.wantTool, tt.wantStep}, []string{res.Error.Tool, res.Error.Step})
			var steps []string
			for _, c := range res.Metadata.ToolCalls {
				steps = append(steps, c.Step)
			}
			require.Equal(t, tt.wantSteps, steps)
			require.False(t, res.CompletedAt.IsZero())
			require.Len(t, f.saved, 1)
			require.Equal(t, res.Error, f.saved[0].Error, "the stored result names them too")
		})
	}
}

// needsApproval is r with call id waiting for a person's decision.
func needsApproval(r contract.CallModelResult, id string) contract.CallModelResult {
	r.Approvals = []contract.ApprovalNeed{{CallID: id, Reason: "the tool's policy asks"}}
	return r
}

// TestModelOverride: a turn naming a model its agent allows calls that
// model at every step; the result names it.
func TestModelOverride(t *testing.T) {
	a := testAgent()
	a.ModelsAllowed = []string{"openai:gpt-4o"}
	reply := func(r contract.CallModelResult) contract.CallModelResult { r.Model = "openai:gpt-4o"; return r }
	f := &fakeTurn{agent: a, replies: []contract.CallModelResult{reply(toolReply(calc("c1", "6*7"))), reply(textReply("42"))},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("42")}}
	env := newEnv(t, f)
	req := request()
	req.Model = "openai:gpt-4o"
	res, failure := runTurn(t, env, req)
	require.Nil(t, failure)
	require.Equal(t, "42", res.Output)
	require.Equal(t, "openai:gpt-4o", res.Metadata.LLMModel)
	require.Len(t, f.modelCalls, 2)
	for _, in := range f.modelCalls {
		require.Equal(t, "openai:gpt-4o", in.Model)
	}

	// The agent's own model named is no override.
	f = &fakeTurn{agent: a, replies: []contract.CallModelResult{textReply("hi")}}
	env = newEnv(t, f)
	req.Model = a.Model
	_, failure = runTurn(t, env, req)
	require.Nil(t, failure)
	require.Empty(t, f.modelCalls[0].Model)
}
