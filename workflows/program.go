package workflows

import (
	"hash/fnv"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Code mode. An agent with code mode (agent.CodeMode) offers its model
// run_program: one program that calls the agent's tools itself. The turn
// runs it as a loop of rounds:
//
//	RunProgram → calls pending → a round of those calls → RunProgram → … → done
//
// RunProgram (a local activity: internal/program runs the interpreter in
// a memory-capped child process, never in workflow code) runs the program
// from its start each time, answering the calls it made before with their
// stored results, until it waits on calls not made yet or ends. Those
// calls run as a round of their own, through the same start, decided and
// collect as the model's calls: the tool's approval policy (a call that
// asks a person waits, durably, for a decision through any door), its
// egress, secrets, timeout and rate limit, the turn's tool limits, and
// tool_start and tool_end events under the call id <run_program call
// id>.<n>. Each call's result is stored as a step of its own, marked as
// the program's (agent.Message.Program): the program's next run reads it
// by step number, and the model does not see it. The model made one call,
// and reads one result: the program's return value and console output, or
// its error with the line, stored as the run_program call's step when the
// program ends.
//
// A worker lost mid-program loses nothing: the workflow replays to where
// it was, and each call the program made is a completed activity with
// its result stored, so no call is made twice.

// programSlotWait is what a RunProgram attempt may wait, beyond its
// program's time, for one of its worker's runner slots.
const programSlotWait = time.Minute

// runProgram runs run_program call i of the round to its end, and
// returns its result as a call's.
func (r *toolRound) runProgram(ctx workflow.Context, i int) (contract.ExecuteToolResult, error) {
	t, c := r.t, r.calls[i]
	in := contract.RunProgramInput{
		TenantID: t.req.TenantID, JobID: t.req.JobID, AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		SessionID: t.req.SessionID, Seq: r.base + 1 + i, Call: c,
		Now: workflow.Now(ctx), Seed: programSeed(c.ID),
		Context: t.req.Context, Caller: t.req.Caller,
	}
	// A run is seconds at most, its interpreter in a child process of
	// its own: a local activity, in the workflow task that scheduled
	// it, saves each run a round trip through the server.
	opts := workflow.LocalActivityOptions{
		StartToCloseTimeout: programTimeout(t.agent.CodeMode),
		RetryPolicy:         toolRetry(),
		Summary:             "run_program " + c.ID,
	}
	lctx := workflow.WithLocalActivityOptions(r.callCtx, opts)
	for {
		if t.canceled != nil {
			r.unstored = in.Failures
			return contract.ExecuteToolResult{}, agent.Errorf(agent.CodeCanceled, "the turn was cancelled while the program ran")
		}
		if err := ctx.Err(); err != nil {
			r.unstored = in.Failures
			return contract.ExecuteToolResult{}, agent.Errorf(agent.CodeTimeout, "the turn ended while the program ran")
		}
		var out contract.RunProgramResult
		err := workflow.ExecuteLocalActivity(lctx, contract.RunProgram, in).Get(ctx, &out)
		// A run that could not reach the database runs again once it is
		// back, as a local tool call does.
		if err = outlast(lctx, contract.RunProgram, t.deadline, in, &out, err, unavailable); err != nil {
			r.unstored = in.Failures
			return contract.ExecuteToolResult{}, err
		}
		if out.Done != nil {
			return *out.Done, nil
		}
		if len(out.Pending) == 0 {
			return contract.ExecuteToolResult{}, agent.Errorf(agent.CodeInternal, "the program neither ended nor waits on a call")
		}
		if in.Made == 0 {
			in.From = r.base + len(r.calls) + r.extra + 1
		}
		if next := r.base + len(r.calls) + r.extra + 1; next != in.From+in.Made || out.Pending[0].N != in.Made {
			// A program's calls take the steps after its earlier ones.
			return contract.ExecuteToolResult{}, agent.Errorf(agent.CodeInternal, "call %d of the program of %s would be step %d, not %d",
				out.Pending[0].N, c.ID, next, in.From+in.Made)
		}
		in.Failures = r.programCalls(ctx, c.ID, out)
		in.Made += len(out.Pending)
	}
}

// programCalls runs the calls a program waits on as a round whose
// results are stored after the steps taken so far, and returns the calls
// that failed (their results are stored by the next RunProgram).
func (r *toolRound) programCalls(ctx workflow.Context, id string, out contract.RunProgramResult) []contract.ToolFailure {
	inner := make([]agent.ToolCall, len(out.Pending))
	for k, pc := range out.Pending {
		inner[k] = agent.ToolCall{ID: contract.ProgramCallID(id, pc.N), Name: pc.Tool, Arguments: string(pc.Args)}
	}
	base := r.base + len(r.calls) + r.extra
	r.extra += len(inner)
	sub := r.t.newRound(inner, r.limits, base)
	sub.program, sub.callCtx = id, r.callCtx
	return sub.run(ctx, out.Approvals)
}

// programTimeout bounds one RunProgram attempt: the program's time per
// run, the grace its process is given to stop, and a wait for a slot.
func programTimeout(c *agent.CodeMode) time.Duration {
	run := 5 * time.Second // internal/program's DefaultTime
	if c != nil && c.TimeSec > 0 {
		run = time.Duration(c.TimeSec) * time.Second
	}
	return run + programSlotWait
}

// programSeed seeds a program's Math.random from its call's id: the same
// on every run of the program, different between programs.
func programSeed(callID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(callID))
	return int64(h.Sum64() >> 1)
}
