package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// fakeProgram stands in for RunProgram: a program that makes its calls
// in batches (batches[k] calls of tool in the k-th), then returns, or
// ends with fault. Each run sees the calls recorded so far, as the real
// one re-executes.
type fakeProgram struct {
	tool    string
	batches []int
	// asks lists the calls (by number) whose tool's policy asks a person.
	asks  map[int]bool
	fault string

	mu   sync.Mutex
	runs []contract.RunProgramInput
}

func (p *fakeProgram) run(_ context.Context, in contract.RunProgramInput) (contract.RunProgramResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs = append(p.runs, in)
	made := 0
	for _, n := range p.batches {
		if in.Made <= made {
			var out contract.RunProgramResult
			for k := range n {
				c := contract.ProgramCall{N: made + k, Tool: p.tool, Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, made+k))}
				out.Pending = append(out.Pending, c)
				if p.asks[c.N] {
					out.Approvals = append(out.Approvals, contract.ApprovalNeed{CallID: contract.ProgramCallID(in.Call.ID, c.N), Reason: "always"})
				}
			}
			return out, nil
		}
		made += n
	}
	if p.fault != "" {
		return contract.RunProgramResult{Done: &contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolError, Preview: p.fault}}, nil
	}
	return contract.RunProgramResult{Done: &contract.ExecuteToolResult{CallID: in.Call.ID, Status: agent.ToolOK,
		Preview: fmt.Sprintf("result: %d", in.Made)}}, nil
}

func codeModeAgent(tools ...string) agent.Agent {
	a := opsAgent()
	a.CodeMode = &agent.CodeMode{Tools: tools}
	return a
}

func runProgramCall(id string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: agent.RunProgramTool, Arguments: `{"program":"return 1"}`}
}

func programEnv(t *testing.T, a agent.Agent, p *fakeProgram) (*fakeTurn, *testsuite.TestWorkflowEnvironment) {
	f := &fakeTurn{agent: a, replies: []contract.CallModelResult{toolReply(runProgramCall("p1")), textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
			"calculator": okTool("4"), "restart": okTool("restarted"),
		}}
	env := newEnv(t, f)
	env.OnActivity(contract.RunProgram, mock.Anything, mock.Anything).Return(p.run)
	return f, env
}

func TestProgramRunsItsCallsAsRounds(t *testing.T) {
	p := &fakeProgram{tool: "calculator", batches: []int{1, 2, 1}}
	f, env := programEnv(t, codeModeAgent("calculator"), p)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)

	// Step 1 is the reply, step 2 the run_program call's result, and the
	// program's four calls take steps 3 to 6, marked as its calls.
	require.Len(t, f.toolCalls, 4)
	// A batch's calls run at once: in any order.
	slices.SortFunc(f.toolCalls, func(a, b contract.ExecuteToolInput) int { return a.Seq - b.Seq })
	for i, c := range f.toolCalls {
		require.Equal(t, fmt.Sprintf("p1.%d", i), c.Call.ID)
		require.Equal(t, "calculator", c.Call.Name)
		require.Equal(t, fmt.Sprintf(`{"n":%d}`, i), c.Call.Arguments)
		require.Equal(t, 3+i, c.Seq)
		require.Equal(t, "p1", c.Program)
	}
	require.Len(t, p.runs, 4, "a run, then one after each batch")
	for i, run := range p.runs {
		require.Equal(t, 2, run.Seq)
		require.Equal(t, "p1", run.Call.ID)
		require.Equal(t, p.runs[0].Now, run.Now, "the program sees one time on every run")
		require.Equal(t, p.runs[0].Seed, run.Seed)
		require.Empty(t, run.Failures)
		require.Equal(t, []int{0, 1, 3, 4}[i], run.Made)
		if run.Made > 0 {
			require.Equal(t, 3, run.From, "call N's result is step From+N")
		}
	}
	// The model's next call reads after every step the program took.
	require.Len(t, f.modelCalls, 2)
	require.Equal(t, 7, f.modelCalls[1].Seq)

	var starts, ends []string
	for _, e := range events(t, env) {
		switch e.Kind {
		case agent.EventToolStart:
			starts = append(starts, e.Tool.CallID)
		case agent.EventToolEnd:
			ends = append(ends, e.Tool.CallID)
			require.Equal(t, agent.ToolOK, e.Tool.Status)
		}
	}
	require.Equal(t, []string{"p1", "p1.0", "p1.1", "p1.2", "p1.3"}, starts)
	require.Equal(t, []string{"p1.0", "p1.1", "p1.2", "p1.3", "p1"}, ends)
	require.Len(t, res.Metadata.ToolCalls, 5)
}

func TestProgramCallWaitsForApproval(t *testing.T) {
	p := &fakeProgram{tool: "restart", batches: []int{1, 1}, asks: map[int]bool{1: true}}
	f, env := programEnv(t, codeModeAgent("restart"), p)
	env.RegisterDelayedCallback(func() {
		pend := pending(t, env)
		require.Len(t, pend, 1, "the program's second call waits")
		require.Equal(t, "p1.1", pend[0].CallID)
		require.Equal(t, "restart", pend[0].Tool)
		f.mu.Lock()
		require.Len(t, f.toolCalls, 1, "the first call ran, the second waits")
		f.mu.Unlock()
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "p1.1", Approved: true, Approver: "alice"})
	}, time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)
	require.Len(t, f.toolCalls, 2, "approved, the call ran and the program went on")
	require.Equal(t, "p1.1", f.toolCalls[1].Call.ID)
	require.Len(t, p.runs, 3)
	require.Equal(t, 2, p.runs[2].Made)
	require.Len(t, f.approvals, 1)
	require.Equal(t, "p1.1", f.approvals[0].CallID)
	require.Equal(t, agent.ApprovalApproved, f.approvals[0].Outcome)
}

func TestProgramCallRejected(t *testing.T) {
	p := &fakeProgram{tool: "restart", batches: []int{1}, asks: map[int]bool{0: true}}
	f, env := programEnv(t, codeModeAgent("restart"), p)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalApprove, agent.ApprovalDecision{CallID: "p1.0", Approved: false, Approver: "alice", Reason: "not now"})
	}, time.Minute)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output)
	require.Empty(t, f.toolCalls, "a rejected call does not run")
	require.Len(t, p.runs, 2)
	// The next run stores the rejection as the call's result, which the
	// program reads as the call's error.
	require.Len(t, p.runs[1].Failures, 1)
	fail := p.runs[1].Failures[0]
	require.Equal(t, contract.ToolFailure{Seq: 3, CallID: "p1.0", Tool: "restart", Message: fail.Message, Program: "p1", Args: `{"n":0}`}, fail)
	require.Contains(t, fail.Message, "not now")
	require.Equal(t, 3, p.runs[1].From)
	require.Equal(t, 1, p.runs[1].Made)
}

func TestProgramCallsCountAgainstToolLimits(t *testing.T) {
	a := codeModeAgent("calculator")
	a.Guardrails = []agent.Guardrail{{ToolLimits: &agent.ToolLimits{PerTurn: 2}}}
	p := &fakeProgram{tool: "calculator", batches: []int{3}}
	f, env := programEnv(t, a, p)
	_, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Len(t, f.toolCalls, 2, "the program's third call is over the turn's limit")
	require.Len(t, p.runs[1].Failures, 1)
	require.Equal(t, "p1.2", p.runs[1].Failures[0].CallID)
	require.Contains(t, p.runs[1].Failures[0].Message, "at most 2 tool calls")
}

func TestProgramErrorIsTheCallsResult(t *testing.T) {
	p := &fakeProgram{tool: "calculator", batches: []int{1}, fault: "the program failed: ReferenceError: x is not defined (line 2, column 1)"}
	f, env := programEnv(t, codeModeAgent("calculator"), p)
	res, failure := runTurn(t, env, req())
	require.Nil(t, failure)
	require.Equal(t, "done", res.Output, "the model reads the error and answers")
	require.Len(t, f.modelCalls, 2)
	var end *agent.ToolEvent
	for _, e := range events(t, env) {
		if e.Kind == agent.EventToolEnd && e.Tool.CallID == "p1" {
			end = e.Tool
		}
	}
	require.NotNil(t, end)
	require.Equal(t, agent.ToolError, end.Status)
	require.Contains(t, end.Output, "line 2, column 1")
}

// TestProgramStopsWhenTheTurnIsCancelled: a cancel while a program's
// call runs stops the call and the program; the model is not called
// again, and the run_program call and its call each get a result.
func TestProgramStopsWhenTheTurnIsCancelled(t *testing.T) {
	p := &fakeProgram{tool: "calculator", batches: []int{1, 1}}
	f, env := programEnv(t, codeModeAgent("calculator"), p)
	f.hold = map[string]bool{"calculator": true}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalCancelTurn, agent.CancelRequest{Reason: "enough", RequestedBy: "ana"})
	}, time.Second)
	res := runCanceled(t, env, req())
	require.Equal(t, "the turn was cancelled by ana: enough", res.Error.Message)
	require.Len(t, f.modelCalls, 1, "no model call after the cancel")
	require.Len(t, p.runs, 1, "the program does not run again")
	var ends []string
	for _, ev := range events(t, env) {
		if ev.Kind == agent.EventToolEnd {
			ends = append(ends, ev.Tool.CallID+" "+ev.Tool.Status)
		}
	}
	require.Equal(t, []string{"p1.0 canceled", "p1 canceled"}, ends)
	var seqs []int
	for _, fl := range f.savedFailures {
		seqs = append(seqs, fl.Seq)
	}
	require.ElementsMatch(t, []int{2, 3}, seqs, "the run_program call (step 2) and its call (step 3) get a result")
}

// TestProgramContinuesAsNew: a program whose calls outgrow a run's
// history hands the turn on between two of them, run after run, and
// goes on in the next from its next call: each call made once, the
// program's runs see every result made before, the round's call before
// the program (which failed) is stored by the model's next call, and
// the model reads after every step the program took.
func TestProgramContinuesAsNew(t *testing.T) {
	const calls = 5
	p := &fakeProgram{tool: "calculator", batches: slices.Repeat([]int{1}, calls)}
	f := &fakeTurn{agent: codeModeAgent("calculator"),
		replies: []contract.CallModelResult{toolReply(calc("c0", "1/0"), runProgramCall("p1")), textReply("done")},
		tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){
			"calculator": func(in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
				if in.Call.ID == "c0" {
					return contract.ExecuteToolResult{}, temporal.NewNonRetryableApplicationError("division by zero", "ToolFailed", nil)
				}
				return okTool("4")(in)
			},
		}}
	req := request()
	var carried *contract.TurnCarry
	var res agent.TurnResult
	var ends []string // the turn's log, read at its end
	runs := 0
	for ; runs < 3*calls; runs++ {
		env := newEnv(t, f)
		env.OnActivity(contract.RunProgram, mock.Anything, mock.Anything).Return(p.run)
		env.SetContinueAsNewSuggested(true)
		env.ExecuteWorkflow(contract.AgentTurn, req, carried)
		require.True(t, env.IsWorkflowCompleted())
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); !errors.As(err, &can) {
			require.NoError(t, err)
			require.NoError(t, env.GetWorkflowResult(&res))
			for _, e := range events(t, env) {
				if e.Kind == agent.EventToolEnd {
					ends = append(ends, e.Tool.CallID)
				}
			}
			break
		}
		carried = nil
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &req, &carried))
		require.NotNil(t, carried.Program, "run %d hands on in the middle of the program", runs)
		require.Equal(t, 1, carried.Program.Index)
		require.Equal(t, runs+1, carried.Program.Made, "one call a run")
		require.Equal(t, 1, carried.Iteration, "no model call while the program runs")
		require.Len(t, carried.Program.Failures, 1, "c0's failure waits for the next model call")
	}
	require.Equal(t, calls+1, runs+1, "a run for each call, and one for the program's end and the answer")
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "done", res.Output)

	require.Len(t, f.toolCalls, 1+calls, "each call made once")
	require.Len(t, p.runs, calls+1)
	for i, run := range p.runs {
		require.Equal(t, i, run.Made)
		require.Equal(t, p.runs[0].Now, run.Now, "the program sees one time in every run")
		if i > 0 {
			require.Equal(t, 4, run.From, "step 1 the reply, 2 and 3 the round's calls, then the program's")
		}
	}
	require.Len(t, f.modelCalls, 2)
	require.Equal(t, 3+calls+1, f.modelCalls[1].Seq)
	require.Equal(t, []contract.ToolFailure{{Seq: 2, CallID: "c0", Tool: "calculator", Message: "division by zero"}}, f.modelCalls[1].ToolFailures)
	require.Equal(t, []string{"c0", "p1.0", "p1.1", "p1.2", "p1.3", "p1.4", "p1"}, ends)
	require.Len(t, res.Metadata.ToolCalls, 2+calls)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[len(res.Metadata.ToolCalls)-1].Status)
}
