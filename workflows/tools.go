package workflows

import (
	"encoding/json"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// tools runs the tool calls of a reply; stop says the turn ends, with
// the output and failure given.
func (t *turn) tools(ctx workflow.Context, step int, reply contract.CallModelResult, limits agent.Limits) (string, *agent.TurnError, bool) {
	if t.canceled != nil && t.canceled.AtBoundary {
		// Stopped at this boundary: the reply's calls do not run, and
		// each is answered so (SaveResult stores them).
		t.unstored = notRun(t.seq, reply.ToolCalls)
		t.seq += len(reply.ToolCalls)
		t.finishStep(ctx, step, reply)
		return reply.Content, t.cancelError(), true
	}
	t.unstored = t.runTools(ctx, reply.ToolCalls, reply.Approvals, limits)
	if p := t.cont.program; p != nil {
		// Its program hands the turn on mid-round: the step ends in the
		// next run, when the program does. What it needs of the reply is
		// its calls, usage and finish.
		p.Step = step
		p.Reply = contract.CallModelResult{ToolCalls: reply.ToolCalls, Usage: reply.Usage, Model: reply.Model, FinishReason: reply.FinishReason}
		return "", nil, true
	}
	return t.afterRound(ctx, step, reply)
}

// afterRound ends a step whose calls have all ended, however they ended;
// stop says the turn ends, with the output and failure given.
func (t *turn) afterRound(ctx workflow.Context, step int, reply contract.CallModelResult) (string, *agent.TurnError, bool) {
	t.finishStep(ctx, step, reply)
	switch {
	case t.canceled != nil:
		return "", t.cancelError(), true
	case ctx.Err() != nil:
		return "", modelFailure(ctx.Err()), true
	}
	for _, h := range t.hooks.round {
		if failure := h.afterTools(ctx); failure != nil {
			return "", failure, true
		}
	}
	return "", nil, false
}

// runTools runs one reply's tool calls in parallel, one activity (or
// local activity, for local tools) each, and returns the calls that failed
// for good (their results are stored by the next CallModel). Calls whose
// tool's policy asks for approval wait for a decision first; a rejected or
// timed-out call fails with a message the model reads as the tool's result.
// A run_program call runs its program (program.go) when collect comes to
// it, its program's calls in rounds of their own.
func (t *turn) runTools(ctx workflow.Context, calls []agent.ToolCall, needs []contract.ApprovalNeed, limits agent.Limits) []contract.ToolFailure {
	t.parts.data = nil
	return t.inRound(ctx, calls, limits, func(r *toolRound) []contract.ToolFailure { return r.run(ctx, needs) })
}

// inRound runs body over a round of calls whose results are stored after
// the turn's last step, and returns the calls that failed. A round whose
// program hands the turn on (program.go) ends with t.cont.program set and the
// turn's steps where they were: the next run goes on with it.
func (t *turn) inRound(ctx workflow.Context, calls []agent.ToolCall, limits agent.Limits, body func(r *toolRound) []contract.ToolFailure) []contract.ToolFailure {
	r := t.newRound(calls, limits, t.seq)
	// A cancellation of the turn stops the round's calls in flight
	// (requestCancel).
	var stop workflow.CancelFunc
	r.callCtx, stop = workflow.WithCancel(ctx)
	t.stopTools = stop
	defer func() {
		t.stopTools = nil
		stop()
	}()
	failures := body(r)
	if r.handOn != nil {
		t.cont.program, t.cont.continuing = r.handOn, true
		return nil
	}
	// The programs' calls (program.go) took the steps after the round's.
	t.seq += len(calls) + r.extra
	n := min(len(t.recs.calls), len(calls)+r.extra)
	t.recs.round, t.recs.afterTools = t.recs.calls[len(t.recs.calls)-n:], true
	return failures
}

// newRound is a round of calls whose results are stored from step
// base+1 on.
func (t *turn) newRound(calls []agent.ToolCall, limits agent.Limits, base int) *toolRound {
	return &toolRound{t: t, calls: calls, base: base, futures: make([]workflow.Future, len(calls)), refused: make([]*agent.ToolEvent, len(calls)),
		local: make([]*workflow.LocalActivityOptions, len(calls)), in: make([]contract.ExecuteToolInput, len(calls)),
		programs: make([]bool, len(calls)), limits: limits}
}

// run starts the round's calls, waits for a decision on those whose
// tool's policy asks a person (needs), and collects every call.
func (r *toolRound) run(ctx workflow.Context, needs []contract.ApprovalNeed) []contract.ToolFailure {
	t, calls := r.t, r.calls
	if t.req.Replay != nil {
		// A replay runs no tool live (ExecuteTool serves the recorded
		// results): no person is asked. A call the recording's person
		// rejected is answered with its recorded refusal.
		needs = nil
	}
	r.needs = needs
	for _, c := range calls {
		if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindDelegate {
			r.delegations++
		}
	}
	var names []string
	var waiting []int
	for i, c := range calls {
		if t.agent.RunsPrograms(c) {
			// run_program is no tool of the agent's: the calls its
			// program makes count against the limits, each in its round.
			r.start(ctx, i)
			continue
		}
		if msg := refusal(t.hooks.admit, c); msg != "" {
			r.refused[i] = &agent.ToolEvent{CallID: c.ID, Name: c.Name, Status: agent.ToolError, Output: msg}
			t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: r.refused[i]})
			continue
		}
		if reasonFor(needs, c.ID) != "" {
			waiting = append(waiting, i)
			continue
		}
		names = append(names, c.Name)
		r.start(ctx, i)
	}
	if len(names) > 0 {
		workflow.SetCurrentDetails(ctx, "running tools: "+strings.Join(names, ", "))
	}
	decide := func(i int, outcome, message string) { r.decided(ctx, i, outcome, message) }
	if len(waiting) > 0 {
		waiting = t.decideByGrants(ctx, r.base, calls, waiting, needs, decide)
	}
	if len(waiting) > 0 {
		t.awaitApprovals(ctx, r.base, calls, waiting, needs, r.limits, false, decide)
	}
	t.recs.forget(len(calls))
	return r.collect(ctx)
}

// forget makes room for n more tool records within what a result
// lists (agent.MaxResultToolCalls), counting the records it drops: a turn
// of any length keeps, and carries, a bounded list.
func (r *toolRecords) forget(n int) {
	if over := len(r.calls) + n - agent.MaxResultToolCalls; over > 0 {
		over = min(over, len(r.calls))
		r.omitted += over
		r.calls = append([]agent.ToolCallRecord(nil), r.calls[over:]...)
	}
}

// toolRound is one reply's tool calls: the future of each call started,
// the tool_end of each call refused.
type toolRound struct {
	t     *turn
	calls []agent.ToolCall
	// base is the step before the round's first: call i's result is
	// stored as step base+1+i.
	base    int
	futures []workflow.Future
	refused []*agent.ToolEvent
	// local holds the options of each local call, to run it again after a
	// database outage; nil for calls that run as activities.
	local []*workflow.LocalActivityOptions
	in    []contract.ExecuteToolInput
	// needs are the calls whose tool's policy asks a person: one of
	// them whose outcome is unknown asks again (askResend).
	needs []contract.ApprovalNeed
	// limits are the turn's; delegations counts the round's
	// delegate_to_agent calls, which share the tokens the turn has left.
	limits      agent.Limits
	delegations int
	// callCtx is the context the round's tool calls run in, which a
	// cancellation of the turn cancels.
	callCtx workflow.Context
	// programs marks the run_program calls, run by collect (program.go);
	// extra counts the steps their programs' calls took after the
	// round's own; program, on a round of a program's calls, is the
	// run_program call's id.
	programs []bool
	extra    int
	program  string
	// unstored are the failed calls of a program that stopped before it
	// stored them (the turn was cancelled or timed out).
	unstored []contract.ToolFailure
	// first is the call collect starts from, and failures those of the
	// calls before it: a round the turn's previous run handed on in the
	// middle of its program (resumed) goes on from that program. handOn
	// is set when the round's program hands the turn on.
	first    int
	failures []contract.ToolFailure
	resumed  *contract.ProgramCarry
	handOn   *contract.ProgramCarry
}

// start logs call i's tool_start and schedules it. The agent was loaded
// by a recorded local activity, so the choice of local or regular activity
// replays the same. Agents stored before tools had an execution run every
// tool as an activity, as they did then.
func (r *toolRound) start(ctx workflow.Context, i int) {
	t, c := r.t, r.calls[i]
	start := &agent.ToolEvent{CallID: c.ID, Name: c.Name, Args: argsJSON(c.Arguments)}
	if spec, ok := t.agent.Tool(c.Name); ok {
		start.Source, start.FromToolkit = spec.Entry(), spec.FromToolkit
	}
	t.emit(ctx, agent.Event{Kind: agent.EventToolStart, Tool: start})
	if t.agent.RunsPrograms(c) {
		r.programs[i] = true // collect runs it
		return
	}
	in := contract.ExecuteToolInput{
		TenantID: t.req.TenantID, JobID: t.req.JobID,
		AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		Seq: r.base + 1 + i, Call: c, SessionID: t.req.SessionID, Program: r.program, Replay: t.req.Replay != nil,
	}
	r.in[i] = in
	if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindDelegate {
		r.delegate(ctx, i, spec)
		return
	}
	if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindAskUser {
		r.ask(ctx, i, spec)
		return
	}
	if spec, ok := t.agent.Tool(c.Name); ok && agent.ScheduledKind(spec.Kind) {
		r.foreign(ctx, i, spec)
		return
	}
	r.schedule(ctx, i, in)
}

// schedule runs call i with in: a local activity for a local tool, an
// activity for the rest.
func (r *toolRound) schedule(ctx workflow.Context, i int, in contract.ExecuteToolInput) {
	t, c := r.t, r.calls[i]
	summary := contract.OneLine(c.Name+" "+c.Arguments, 120)
	r.in[i] = in
	if spec, ok := t.agent.Tool(c.Name); ok && spec.IsLocal() {
		opts := workflow.LocalActivityOptions{
			StartToCloseTimeout: min(localToolTimeout, toolTimeout(spec, turnTimeout(t.req, t.agent.Limits.WithDefaults()))),
			RetryPolicy:         toolRetry(),
			Summary:             summary,
		}
		r.local[i] = &opts
		t.clock.local++
		r.futures[i] = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(r.callCtx, opts), contract.ExecuteTool, in)
		return
	}
	spec, _ := t.agent.Tool(c.Name)
	actx := workflow.WithActivityOptions(r.callCtx, workflow.ActivityOptions{
		StartToCloseTimeout: toolTimeout(spec, turnTimeout(t.req, t.agent.Limits.WithDefaults())),
		HeartbeatTimeout:    toolHeartbeat,
		RetryPolicy:         toolRetry(),
		Summary:             summary,
		// A call in flight when the turn ends is waited for: its outcome
		// is what happened (a result, or its cancellation), whatever the
		// turn decides next.
		WaitForCancellation: true,
	})
	in.Live = t.log.HandOn(t.req.Streaming())
	r.futures[i] = workflow.ExecuteActivity(actx, contract.ExecuteTool, in)
}

// decided acts on a person's decision on call i: run it, or log that it
// will not run.
func (r *toolRound) decided(ctx workflow.Context, i int, outcome, message string) {
	if outcome == agent.ApprovalApproved && r.t.canceled == nil {
		r.start(ctx, i)
		return
	}
	if outcome == agent.ApprovalApproved {
		outcome, message = agent.ToolCanceled, "the call was approved, but the turn was cancelled before it ran"
	}
	c := r.calls[i]
	r.refused[i] = &agent.ToolEvent{CallID: c.ID, Name: c.Name, Status: outcome, Output: message}
	r.t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: r.refused[i]})
}

// collect waits for every call in the model's order, logs its tool_end and
// records it, and returns the calls that failed.
func (r *toolRound) collect(ctx workflow.Context) []contract.ToolFailure {
	t := r.t
	failures := r.failures
	for i, c := range r.calls {
		if i < r.first {
			continue
		}
		rec := agent.ToolCallRecord{CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments)}
		fail := func(status, msg string) {
			rec.Status = status
			f := contract.ToolFailure{Seq: r.base + 1 + i, CallID: c.ID, Tool: c.Name, Message: msg, Program: r.program,
				Unknown: status == agent.ToolUnknown}
			if r.program != "" || f.Unknown {
				f.Args = c.Arguments
			}
			failures = append(failures, f)
		}
		switch f := r.futures[i]; {
		case r.refused[i] != nil:
			fail(r.refused[i].Status, r.refused[i].Output)
		case f == nil && !r.programs[i] && t.canceled != nil:
			fail(agent.ToolCanceled, "the turn was cancelled before the call ran")
		case f == nil && !r.programs[i]:
			// The turn ended (its timeout) while the call waited.
			fail(agent.ToolError, "the turn ended before the call was decided")
		default:
			end := agent.ToolEvent{CallID: c.ID, Name: c.Name}
			res, err := r.outcome(ctx, i)
			if err == nil && res.Status == agent.ToolUnknown && r.asksAgain(ctx, c.ID) {
				res, err = r.askResend(ctx, i, res)
			}
			if r.handOn != nil {
				// The program hands the turn on: its call ends in the
				// next run, which stores the failures so far with the
				// round's.
				r.handOn.Failures = failures
				return nil
			}
			if left := r.unstored; len(left) > 0 {
				// A program stopped with calls whose results it never
				// stored: they are, with the turn's.
				failures, r.unstored = append(failures, left...), nil
			}
			if err != nil {
				status, msg := callFailure(r.local[i] != nil || r.programs[i], err, t.canceled != nil)
				rec.Step = contract.StepOf(err)
				fail(status, msg)
				end.Status, end.Output = status, contract.OneLine(msg, 200)
			} else {
				rec.Status, rec.CacheHit, rec.Step = res.Status, res.CacheHit, res.Step
				t.parts.cacheHit = t.parts.cacheHit || res.CacheHit
				end.Status, end.Output, end.Data = res.Status, contract.OneLine(res.Preview, 200), res.Data
				if res.Data != nil {
					t.parts.data = res.Data
				}
				for _, p := range res.Parts {
					t.parts.files = append(t.parts.files, agent.Block{Type: p.Type, Ref: p.URL, MIMEType: p.MIMEType, Name: p.Name, CallID: c.ID})
				}
				if len(res.Citations) > 0 && len(t.parts.retrieved) < agent.MaxTurnRetrievals {
					t.parts.retrieved = append(t.parts.retrieved, res.Citations)
				}
			}
			t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: &end})
		}
		t.recs.calls = append(t.recs.calls, rec)
		for _, h := range t.hooks.tool {
			h.afterTool(ctx, rec)
		}
	}
	return failures
}

// outcome waits for call i's result: its activity's, or, for a
// run_program call, its program's.
func (r *toolRound) outcome(ctx workflow.Context, i int) (contract.ExecuteToolResult, error) {
	if r.programs[i] {
		return r.runProgram(ctx, i)
	}
	t, f := r.t, r.futures[i]
	var res contract.ExecuteToolResult
	t.awaitTool(ctx, f)
	err := f.Get(ctx, &res)
	if opts := r.local[i]; err != nil && opts != nil {
		// A local call that could not reach the database runs
		// again once it is back (a regular activity waits inside).
		err = outlast(workflow.WithLocalActivityOptions(r.callCtx, *opts), contract.ExecuteTool, t.deadline, r.in[i], &res, err, unavailable)
	}
	return res, err
}

func reasonFor(needs []contract.ApprovalNeed, callID string) string {
	for _, n := range needs {
		if n.CallID == callID {
			return n.Reason
		}
	}
	return ""
}

// argsJSON keeps valid JSON arguments as they are and quotes the rest, so
// the result's tool_calls stay valid JSON whatever the model wrote.
func argsJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	// Marshalling a string is deterministic; workflowcheck cannot tell.
	b, _ := json.Marshal(s) //workflowcheck:ignore
	return b
}

// notRun answers the tool calls of a reply stored at step seq that the
// turn stopped before running.
func notRun(seq int, calls []agent.ToolCall) []contract.ToolFailure {
	out := make([]contract.ToolFailure, len(calls))
	for i, c := range calls {
		out[i] = contract.ToolFailure{Seq: seq + 1 + i, CallID: c.ID, Tool: c.Name, Message: "the turn was stopped before the call ran"}
	}
	return out
}
