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
//
// A program of many calls outgrows a run's history as a turn of many
// steps does, and hands the turn on the same way: between two of its
// calls, when nothing runs or waits, it continues as new with where it
// was (contract.ProgramCarry: the step, the program's next call, the
// time it sees), and the next run goes on with it before its next model
// call. The program's next run reads the results of the calls before by
// step, as always, so the hand-on changes nothing it sees. Only the last
// call of its reply can hand on (the calls before it have ended; one
// after it would be running); a program that is not ends, with an error
// the model can act on, before its run's history reaches Temporal's
// limit.

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
	if p := r.resumed; p != nil && p.Index == i {
		// Handed on by the turn's previous run: the program goes on
		// from its next call.
		in.Now, in.From, in.Made, in.Failures = p.Now, p.From, p.Made, p.Pending
		r.resumed = nil
	}
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
		if t.canceled != nil || ctx.Err() != nil || !t.shouldContinue(ctx, r.limits) {
			continue
		}
		if r.program == "" && i == len(r.calls)-1 {
			// The run's history is full: the turn hands on here, between
			// two of the program's calls, with nothing running or
			// waiting. Only the round's last call can: the calls before
			// it have ended, and none comes after it.
			r.handOn = &contract.ProgramCarry{Index: i, Extra: r.extra, Now: in.Now, From: in.From, Made: in.Made, Pending: in.Failures}
			return contract.ExecuteToolResult{}, nil
		}
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() >= programMaxHistoryEvents || info.GetCurrentHistorySize() >= programMaxHistoryBytes {
			// One that cannot hand on stops well before Temporal's limit
			// on a run would end the turn, with an error the model can
			// act on.
			r.unstored = in.Failures
			return contract.ExecuteToolResult{}, agent.Errorf(agent.CodeInvalid,
				"the program made %d calls, more than one run of the turn holds when run_program is not the reply's last tool call: make it the last and the program goes on past this", in.Made)
		}
	}
}

// A program that cannot hand its turn on (another call of its reply comes
// after it) ends once its run's history reaches these: Temporal ends a
// run at 51,200 events or 50 MB.
const (
	programMaxHistoryEvents = 40_000
	programMaxHistoryBytes  = 40 << 20
)

// resumeProgram goes on with the round a program handed on (the turn's
// previous run stopped it between two of its calls): the program runs
// from its next call, the round ends with it, and so does its step; stop
// says the turn ends, with the output and failure given. The round's
// calls before the program ended in the previous run: their records and
// events are there, their failures carried.
func (t *turn) resumeProgram(ctx workflow.Context, p contract.ProgramCarry, limits agent.Limits) (string, *agent.TurnError, bool) {
	calls := p.Reply.ToolCalls
	if p.Index < 0 || p.Index >= len(calls) || !t.agent.RunsPrograms(calls[p.Index]) {
		return "", agent.TurnErrorOf(agent.Errorf(agent.CodeInternal, "the carried program is call %d of %d, not a run_program call", p.Index, len(calls))), true
	}
	t.unstored = t.inRound(ctx, calls, limits, func(r *toolRound) []contract.ToolFailure {
		r.first, r.failures, r.extra, r.resumed = p.Index, p.Failures, p.Extra, &p
		r.programs[p.Index] = true
		return r.collect(ctx)
	})
	if t.cont.program != nil {
		// It hands on again.
		t.cont.program.Step, t.cont.program.Reply = p.Step, p.Reply
		return "", nil, true
	}
	return t.afterRound(ctx, p.Step, p.Reply)
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
