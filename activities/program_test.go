package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// startProgram starts a turn of agent coder whose reply (step 1) is one
// run_program call of source, and returns RunProgram's first input.
func (h *harness) startProgram(t *testing.T, source string) contract.RunProgramInput {
	t.Helper()
	job := randomJob()
	in := loadAgentInput(job, "program")
	in.Request.AgentID, in.AgentID = "coder", "coder"
	var loaded contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, in, &loaded)
	args, err := json.Marshal(map[string]string{"program": source})
	require.NoError(t, err)
	call := agent.ToolCall{ID: "p", Name: agent.RunProgramTool, Arguments: string(args)}
	require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
	return contract.RunProgramInput{TenantID: "demo", JobID: job, AgentID: "coder", AgentVersion: loaded.Agent.Version, Seq: 2, Call: call, Seed: 1}
}

// TestRunProgram drives a program of two calls as the turn does: each
// run returns the call it waits on, ExecuteTool makes it and stores its
// result as the program's, and the last run stores the program's answer
// as the run_program call's result, which a retry returns again. The
// model reads that one result, not the calls'.
func TestRunProgram(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	in := h.startProgram(t, "const a = await tools.tally({});\nconst b = await tools.calculator({expression: \"6 * 7\"});\nconsole.log(a);\nreturn b;")
	h.toolRuns.Store(0)
	want := []contract.ProgramCall{
		{N: 0, Tool: "tally", Args: json.RawMessage(`{}`)},
		{N: 1, Tool: "calculator", Args: json.RawMessage(`{"expression":"6 * 7"}`)},
	}
	in.From = 3
	for n, call := range want {
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.Nil(t, out.Done)
		require.Equal(t, []contract.ProgramCall{call}, out.Pending)
		require.Empty(t, out.Approvals)
		var res contract.ExecuteToolResult
		h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: in.JobID, AgentID: "coder", AgentVersion: in.AgentVersion,
			Seq: 3 + n, Program: "p", Call: agent.ToolCall{ID: contract.ProgramCallID("p", n), Name: call.Tool, Arguments: string(call.Args)}}, &res)
		require.Equal(t, agent.ToolOK, res.Status)
		in.Made++
	}
	for range 2 { // the second is a retry of a run whose completion was lost
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.Empty(t, out.Pending)
		require.NotNil(t, out.Done)
		require.Equal(t, agent.ToolOK, out.Done.Status)
		require.Equal(t, "console:\nrun 1\nresult: 42\n(2 tool calls)", out.Done.Preview)
	}
	require.EqualValues(t, 1, h.toolRuns.Load(), "the program's runs never made its calls again")

	steps, err := h.store.StepsBetween(t.Context(), "demo", in.JobID, 1, 5)
	require.NoError(t, err)
	require.Len(t, steps, 4)
	msgs := messagesOf(steps)
	require.Len(t, msgs, 2, "the model reads its call and the program's result, not the program's calls")
	require.Equal(t, "p", msgs[1].ToolCallID)
	require.NotContains(t, digestOf(1, steps), "step 3", "nor does its digest of the turn")
}

// TestRunProgramFaults: what the model wrote wrong is the run_program
// call's error result, with the line; a call the program did not make
// again is a replay error, not a wrong answer.
func TestRunProgramFaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	for _, tc := range []struct{ name, source, want string }{
		{"syntax", "return (1;", "the program failed: SyntaxError"},
		{"runtime", "const x = 1;\nreturn x.y.z;", "(line 2, column"},
		{"a tool it may not call", "return await tools.echo_data({});", "the program failed: TypeError"},
		{"calls over the limit", "for (let i = 0; i < 1001; i++) { tools.tally({}); }", "limit: calls (1000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := h.startProgram(t, tc.source)
			var out contract.RunProgramResult
			h.execute(t, contract.RunProgram, in, &out)
			require.NotNil(t, out.Done)
			require.Equal(t, agent.ToolError, out.Done.Status)
			require.Contains(t, out.Done.Preview, tc.want)
		})
	}
	t.Run("not the recorded call", func(t *testing.T) {
		in := h.startProgram(t, "return await tools.calculator({expression: \"1 + 1\"});")
		require.NoError(t, h.store.PutStep(t.Context(), "demo", in.JobID, 3, agent.Message{Role: agent.RoleTool, ToolCallID: "p.0", Name: "calculator",
			Content: "3", Program: "p", ToolCalls: []agent.ToolCall{{ID: "p.0", Name: "calculator", Arguments: `{"expression":"1 + 2"}`}}}))
		in.From, in.Made = 3, 1
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.NotNil(t, out.Done)
		require.Equal(t, agent.ToolError, out.Done.Status)
		require.Contains(t, out.Done.Preview, "the program failed:")
	})
}

// FuzzRecordedOf: whatever a tool stored as a program's call's result,
// the program gets it back as a JSON value or as the call's error, with
// the call it made.
func FuzzRecordedOf(f *testing.F) {
	for _, s := range []string{`42`, `{"a":[1,2]}`, `plain text`, errorPrefix + "no such order", "", `"quoted"`, "{broken", "\xff\xfe"} {
		f.Add(s, `{"i":1}`)
	}
	f.Fuzz(func(t *testing.T, content, args string) {
		m := agent.Message{Role: agent.RoleTool, Content: content, Program: "p", ToolCalls: []agent.ToolCall{{ID: "p.3", Name: "square", Arguments: args}}}
		r := recordedOf(3, m)
		require.Equal(t, 3, r.N)
		require.Equal(t, "square", r.Tool)
		require.Equal(t, args, string(r.Args))
		if statusOf(content) == agent.ToolError {
			require.Equal(t, content[len(errorPrefix):], r.Error)
			return
		}
		require.Empty(t, r.Error)
		require.True(t, json.Valid(r.Result), "%q", r.Result)
	})
}
