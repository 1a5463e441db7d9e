package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/words"
)

// modelPolicy is which model the turn calls and what it does with an
// answer: the agent's model or the one the request chose, the fallback
// that took over after a failure (fallback), and the repair of an answer
// that does not match the output schema.
type modelPolicy struct {
	// model is the model the turn called last (the result's llm_model);
	// calling, once a fallback model has taken over, the model its next
	// step calls (callingModel).
	model   string
	calling string
	// output is the final answer as JSON, when the turn has an output
	// schema and the answer matched it; repairs counts the calls made to
	// repair an answer that did not (at most one), and repair is what the
	// next model call is to repair.
	output  json.RawMessage
	repairs int
	repair  string
}

func (p *modelPolicy) start(_ workflow.Context, _ *turn, carried *contract.TurnCarry) error {
	if carried != nil {
		m := carried.ModelCarry
		p.model, p.calling, p.repairs = m.Model, m.Calling, m.Repairs
	}
	return nil
}

// carry hands on the model and the fallback; a repair is asked for by
// the answer that ends a turn's loop, never at a boundary.
func (p *modelPolicy) carry(c *contract.TurnCarry) error {
	c.ModelCarry = contract.ModelCarry{Model: p.model, Calling: p.calling, Repairs: p.repairs}
	return nil
}

// answered acts on a reply without tool calls: the turn's answer, unless
// a component has the model answer again (answerHook: a message came
// while the model answered, which it reads) or the answer does not match the output schema (again:
// one call repairs it; a repair that does not match either fails the
// turn).
func (t *turn) answered(ctx workflow.Context, step int, reply contract.CallModelResult, limits agent.Limits) (string, *agent.TurnError, bool) {
	t.finishStep(ctx, step, reply)
	again := false
	for _, h := range t.hooks.answer {
		again = h.answerAgain(ctx) || again
	}
	if again && t.iteration < limits.MaxIterations+t.repairs {
		// (With no iteration left, the turn ends and its conversation
		// answers the message.)
		return "", nil, true
	}
	if reply.OutputProblems == "" {
		t.output = reply.OutputJSON
		return reply.Content, nil, false
	}
	if t.repairs > 0 {
		return "", agent.TurnErrorOf(agent.Errorf(agent.CodeInvalidOutput,
			"the model's answer does not match the output schema, also after a repair: %s", words.Clip(reply.OutputProblems, 1000))), false
	}
	workflow.GetLogger(ctx).Info("answer does not match the output schema; repairing it", "problems", reply.OutputProblems)
	t.repairs, t.repair = 1, reply.OutputProblems
	return "", nil, true
}

// callModel runs iteration i's CallModel as the turn's next step (whose
// first message is at seq first), taking its token batches into the
// event log while it runs. A cancellation of
// the turn stops the call. When the call fails for good with an error
// the agent falls back on, the step calls the agent's next fallback
// model (fallback), and so on down its list; the model that answered
// takes the turn's later steps (callingModel), so that an outage costs
// the turn its retries once, not at every step.
func (t *turn) callModel(ctx workflow.Context, limits agent.Limits, i, first int) (contract.CallModelResult, error) {
	// A child turn's parent gets the call's tokens after its tool events.
	t.forward.Flush(ctx)
	model := t.callingModel(t.agent.Model)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s (iteration %d of at most %d)", model, i, limits.MaxIterations))
	mctx, stop := workflow.WithCancel(ctx)
	t.stopModel = stop
	defer func() {
		t.stopModel = nil
		stop()
	}()
	repair := t.repair
	if repair != "" {
		// What was wrong with the answer is the step before the repair's
		// (CallModelInput.Repair).
		t.seq++
		t.repair = ""
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s to repair an answer that does not match the output schema", model))
	}
	t.seq++
	t.recs.afterTools = false
	t.emit(ctx, agent.Event{Kind: agent.EventStepStart, Step: t.seq})
	t.log.OpenStep(t.seq)
	defer t.log.CloseStep()
	in := t.modelInput(repair)
	for _, h := range t.hooks.call {
		h.beforeCall(&in, first)
	}
	// queued: the provider governor would have had the call wait, so the
	// call goes as an activity (contract.MustWait).
	queued := false
	for {
		if model != t.agent.Model {
			in.Model = model
		}
		in.Live = t.log.HandOn(t.req.Streaming())
		reply, local, err := t.oneCall(ctx, mctx, limits, in, fmt.Sprintf("%s · iteration %d", model, i), localCall(t.agent, in) && !queued)
		if err == nil {
			return reply, nil
		}
		// Only a call run locally fails with MustWait, whether it ended in
		// its local activity or was handed off before the governor was
		// asked (its first stages outlasted the hand-off); queued, it goes
		// as an activity, which waits instead.
		if attempt, ok := contract.MustWaitAttempt(err); ok && !queued {
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s, which waits for the provider's limits (iteration %d of at most %d)", model, i, limits.MaxIterations))
			queued, in.AttemptBase = true, attempt
			continue
		}
		t.awaitStop(ctx, err, local)
		for _, h := range t.hooks.cut {
			if h.cutShort(ctx, err, in) {
				return reply, errCutShort
			}
		}
		next := t.fallback(ctx, model, err)
		if next == "" {
			t.seal(ctx, in)
			if t.canceled != nil {
				// Stopped while it wrote: what it had written is the
				// turn's partial answer.
				t.partial = t.log.TextFrom(in.FirstIndex)
			}
			return reply, err
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s after %s failed (iteration %d of at most %d)", next, model, i, limits.MaxIterations))
		// The fallback's attempts follow the failed call's: its first
		// voids what they streamed (from the step's first index on). It
		// asks the governor anew, locally when the turn's calls are local.
		model, in.AttemptBase, queued = next, in.AttemptBase+modelAttempts, false
		t.model, t.calling = next, next
	}
}

// modelInput is the CallModel input of the step callModel opened (t.seq),
// repairing repair when it is not ""; the components add theirs
// (callHook).
func (t *turn) modelInput(repair string) contract.CallModelInput {
	in := contract.CallModelInput{
		TenantID: t.req.TenantID, JobID: t.req.JobID,
		AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		SessionID: t.req.SessionID, History: t.req.History,
		Seq: t.seq, ToolFailures: t.unstored,
		Stream: t.req.Streaming(), StreamID: t.workflowID, FirstIndex: t.log.Next(), Notify: t.req.Notify,
		Context: t.req.Context, Caller: t.req.Caller, TailInResult: t.req.Notify == "", Channel: t.req.Channel,
		OutputSchema: t.req.OutputSchema, Repair: repair,
		// A Workflow Streams subscriber polls the log, so it gets the
		// batches as signals, as they stream.
		LiveFirst: t.req.Notify == "" && !t.log.Polled(),
	}
	return in
}

// oneCall makes one call of the step's model: local or an activity
// (startModel), and a local call that outlasted handOffAfter, which runs
// on in the worker, awaited by the activity that takes its result over
// (awaitHandedOff). local reports how the call ended.
func (t *turn) oneCall(ctx, mctx workflow.Context, limits agent.Limits, in contract.CallModelInput, summary string, local bool) (contract.CallModelResult, bool, error) {
	var reply contract.CallModelResult
	steerable := t.iteration < limits.MaxIterations+t.repairs
	err := t.awaitModel(ctx, t.startModel(mctx, limits, in, summary, local), &reply, steerable)
	if err == nil && reply.HandedOff {
		local = false
		err = t.awaitModel(ctx, awaitHandedOff(mctx, limits, in, reply.Attempt, summary), &reply, steerable)
	}
	return reply, local, err
}

// startModel starts a model call: a local activity when local says so
// (localCall), else an activity (doc.go says why). The choice rests on
// what the history holds (the pinned agent version, the request, a
// subscriber's polls, a local call's MustWait failure), so a replay makes
// it again.
func (t *turn) startModel(ctx workflow.Context, limits agent.Limits, in contract.CallModelInput, summary string, local bool) workflow.Future {
	opts := modelOptions(limits, summary)
	if local && t.clock.held(ctx) >= handOffAfter {
		// The task has been held long enough by the calls before: it ends
		// here, so that a lost worker costs the turn at most a short task
		// timeout, and the call starts in the next.
		_ = workflow.Sleep(ctx, time.Millisecond)
	}
	if local {
		if opts.StartToCloseTimeout > handOffAfter {
			// A call whose own timeout is shorter ends by then anyway.
			in.HandOffAfterMs = int(handOffAfter / time.Millisecond)
		}
		// The call ends at the turn's deadline in the worker, where the
		// turn's timer would reach it only at the next workflow task
		// (awaitStop).
		t.clock.local++
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: max(t.deadline.Sub(workflow.Now(ctx)), time.Second),
			StartToCloseTimeout:    opts.StartToCloseTimeout,
			RetryPolicy:            opts.RetryPolicy,
			Summary:                opts.Summary,
		}), contract.CallModel, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.CallModel, in)
}

// handOffAfter is how long a local model call holds its turn's workflow
// task before it is handed off to an activity (awaitHandedOff), and how
// long the calls of one task may hold it before the next starts in a
// task of its own: well under the task's timeout, so that the SDK never
// has to heartbeat the task, and a lost worker is noticed at the task's
// timeout or the activity's heartbeat timeout, both a few seconds.
const handOffAfter = time.Second

// awaitHandedOff starts the activity that takes over a local call handed
// off as the step's attempt attempt (contract.AwaitModel): on the same
// worker it waits for the call; anywhere else, or retried, it calls the
// model again, as the attempts after it.
func awaitHandedOff(ctx workflow.Context, limits agent.Limits, in contract.CallModelInput, attempt int, summary string) workflow.Future {
	in.AttemptBase, in.HandOffAfterMs = attempt, 0
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, modelOptions(limits, summary)), contract.AwaitModel, in)
}

// localCall reports whether the turn runs the model call in as a local
// activity (startModel): when the agent asks for it (agent.ModelLocal,
// the default) and the call streams, if at all, live first. A call that
// streams into the log (a parent turn or a process is notified, or a
// Workflow Streams subscriber polls the log) stays an activity: the log
// takes its batches as they come, between workflow tasks, which a local
// call would hold back until it is done. A local call the provider
// governor would have wait is sent again as an activity (callModel).
func localCall(a agent.Agent, in contract.CallModelInput) bool {
	return a.LocalModelCalls() && (!in.Stream || in.LiveFirst)
}

// errCutShort is callModel's when a component stopped the call on
// purpose (cutHook: a message steered into the turn interrupted it): the turn goes on (loop), the answer cut short
// kept (steering.cut).
var errCutShort = errors.New("the model call was cut short by a message steered in")

// seal takes into the log what a streaming call that failed for good, or
// was stopped, showed its followers (contract.SealStream): they have seen
// it at the indices the turn would otherwise give its next events. The
// text stays; a fallback's call voids it itself.
//
// A live-first call's is what the live path stored. A signalled call's is
// in the batches its signals brought; but a stopped call's activity runs
// on until its next heartbeat tells it, and each batch it signals goes
// live once sent, whether or not the turn takes it: the seal fences the
// stream so that none goes live after it, and the batches signalled
// before, which the history holds ahead of the seal's result, are taken
// now, before the turn's own next events take their indices.
func (l *logging) seal(ctx workflow.Context, in contract.CallModelInput) {
	if !in.Stream {
		return
	}
	if !in.LiveFirst {
		defer l.log.TakeBatches(ctx)
	}
	// A stopped turn still seals: its context is canceled.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	var b *agent.TokenBatch
	err := dbStep(dctx, contract.SealStream, l.t.deadline, contract.SealStreamInput{
		StreamID: l.t.workflowID, Step: in.Seq, From: l.log.Next(), VoidFrom: in.FirstIndex}, &b)
	if err != nil {
		workflow.GetLogger(ctx).Warn("sealing the stream failed", "step", in.Seq, "error", contract.ErrorOf(err).Message)
		return
	}
	if b != nil {
		l.log.AcceptTail(ctx, b, b.First+int64(len(b.Events))-1)
	}
}

// callingModel is the model the turn's next step calls: the agent's own
// (agentModel), or the fallback model that last took over from it.
func (p *modelPolicy) callingModel(agentModel string) string {
	if p.calling != "" {
		return p.calling
	}
	return agentModel
}

// fallback is the model to call after a call of model failed for good
// with err: the agent's next fallback model when the agent falls back on
// err's type (agent.Agent.NextModel) and the turn goes on; "" when the
// failure stands. Temporal's retries of the call have run by then: a
// fallback takes over from a call whose retries are spent (or that was
// refused outright), never from one attempt of it.
func (t *turn) fallback(ctx workflow.Context, model string, err error) string {
	if t.canceled != nil || ctx.Err() != nil {
		return ""
	}
	e := contract.ErrorOf(err)
	next := t.agent.NextModel(model, e.Code.Class().Type)
	if next == "" {
		return ""
	}
	workflow.GetLogger(ctx).Info("model call failed; falling back", "model", model, "fallback", next,
		"type", e.Code.Class().Type, "error", e.Message)
	return next
}

// modelFailure describes a failed model call for the result: errors that
// name their cause keep it, and the rest are the model's failure.
func modelFailure(err error) *agent.TurnError {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return agent.TurnErrorOf(agent.Errorf(agent.CodeModelFailed, "model call timed out"))
	}
	e := contract.ErrorOf(err)
	switch e.Code {
	case agent.CodeCanceled:
		// The turn's timeout cancels the call; run reports it.
		e = agent.Errorf(agent.CodeTimeout, "turn was cancelled")
	case agent.CodeModelRejected, agent.CodeContextLength, agent.CodeInvalid, agent.CodeAgentNotFound, agent.CodeBudget, agent.CodeGuardrailTripped:
	default:
		e = &agent.Error{Code: agent.CodeModelFailed, Message: e.Message}
	}
	return agent.TurnErrorOf(e)
}

// finishStep logs step_finish for the step whose model call answered with
// reply, in runs that log the vocabulary: the call's usage, and why the
// model stopped. A reason the provider did not give, or one no client
// could take, is told from the reply.
func (l *logging) finishStep(ctx workflow.Context, step int, reply contract.CallModelResult) {
	usage := reply.Usage
	e := agent.Event{Kind: agent.EventStepFinish, Step: step, Usage: &usage, FinishReason: reply.FinishReason, Model: reply.Model}
	if e.FinishReason == "" || e.Validate() != nil {
		e.FinishReason = agent.FinishStop
		if len(reply.ToolCalls) > 0 {
			e.FinishReason = agent.FinishToolCalls
		}
	}
	l.emit(ctx, e)
}
