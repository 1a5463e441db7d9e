package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// AgentTurn (contract.AgentTurn) runs one agent turn: route the request,
// pin the agent's version, call the model and the tools it asks for until
// it answers, and store the result. When the turn cannot complete it fails
// with contract.TurnFailure: a non-retryable application error whose type
// is one of agent.ErrType* and whose details hold the TurnResult (status
// rejected or failed).
//
// A turn of many steps continues as new at a step boundary once its
// run's history is long (agent.Limits.HistoryEvents, or the server
// suggests it): the next run, on the same workflow id, starts from what
// this one hands on (carried, contract.TurnCarry; nil on the first run),
// so the turn has one id, one event log, one result, and any number of
// steps.
func AgentTurn(ctx workflow.Context, req agent.TurnRequest, carried *contract.TurnCarry) (agent.TurnResult, error) {
	info := workflow.GetInfo(ctx)
	req.Normalize()
	if req.JobID == "" {
		req.JobID = info.WorkflowExecution.ID
	}
	if req.Channel == "" {
		req.Channel = defaultChannel(ctx)
	}
	t := &turn{req: req, workflowID: info.WorkflowExecution.ID, start: workflow.Now(ctx)}
	res, err := t.run(ctx, carried)
	if t.log != nil && !t.cont.continuing {
		// Subscribers polling as the turn ends get every event through
		// its final status before the workflow closes, and those its
		// starter expects within its window (DrainStream says why only
		// they).
		t.log.DrainStream(ctx, t.start.Add(t.req.StreamWindow()), t.req.StreamWindow() > 0)
	}
	return res, err
}

// turn is the core's state; the features' state is in the components
// it embeds (component.go).
type turn struct {
	req        agent.TurnRequest
	workflowID string
	start      time.Time
	deadline   time.Time    // the turn's timeout, once the agent is loaded
	cont       continuation // its place among the turn's runs
	clock      taskClock    // where the run's workflow task stands

	agent agent.Agent
	rule  string
	// iteration counts the turn's model calls; seq is the last step
	// stored for the turn (0 is the prompt).
	iteration int
	seq       int
	usage     agent.Usage
	recs      toolRecords // the tool calls' records
	// unstored are tool calls that did not run whose results no CallModel
	// has stored yet: SaveResult stores them when the turn ends first.
	unstored []contract.ToolFailure
	parts    resultParts // what the result is made of besides its answer
	hooks    stageHooks  // the components' stage hooks (component.go)

	logging
	searchAttrs
	stopper
	steering
	waits
	delegating
	modelPolicy
	toolLimits
	turnContext
	preparing
	metering
	tokenBudget
	delivering
}

// continuation is the run's place in the turn's chain of runs.
type continuation struct {
	// runs is the number of runs before this one; continuing says this
	// run hands the turn on to the next.
	runs       int
	continuing bool
	// program is a program in the middle of its calls when the turn
	// hands on (program.go), carried to the next run.
	program *contract.ProgramCarry
}

// toolRecords are the records of the turn's tool calls.
type toolRecords struct {
	// calls are the records of the turn's latest tool calls, at most
	// agent.MaxResultToolCalls; omitted counts those before them.
	calls   []agent.ToolCallRecord
	omitted int
	// round is the records of the latest tool round's calls, and
	// afterTools says no model call has started since it ended: a
	// failure then may be the round's doing (blame).
	round      []agent.ToolCallRecord
	afterTools bool
}

// resultParts is what the turn's result is made of besides its answer.
type resultParts struct {
	// data is what the latest tool round's calls produced last, by ref:
	// the turn's answer rests on it; cacheHit says a tool call's result
	// came from the tenant's cache; reasoning is what the turn's model
	// calls thought, in order, and files the images and files its tool
	// calls produced: the result's blocks, with its JSON and text.
	data      *agent.DataPreview
	cacheHit  bool
	reasoning []string
	files     []agent.Block
	// retrieved are the citations of the turn's retrievals (its retrieve
	// calls, its prepare phase), a list each as it was numbered: the
	// result cites those its answer drew on (agent.Cited).
	retrieved [][]agent.Citation
}

func (t *turn) run(ctx workflow.Context, carried *contract.TurnCarry) (agent.TurnResult, error) {
	cs := t.components()
	for _, c := range cs {
		if err := c.start(ctx, t, carried); err != nil {
			return agent.TurnResult{}, err
		}
	}
	t.hooks = hooksOf(cs)
	if carried != nil {
		t.resume(*carried)
		return t.steps(ctx)
	}
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	if err := t.check(ctx); err != nil {
		return t.reject(ctx, err)
	}
	if res, done, err := t.load(ctx); done {
		return res, err
	}
	return t.steps(ctx)
}

// check refuses a request the turn cannot run, before it reads anything.
func (t *turn) check(ctx workflow.Context) error {
	if err := t.req.ValidateBase(); err != nil {
		return agent.WithCode(agent.CodeInvalid, err)
	}
	if err := t.req.ValidateEnvelope(); err != nil {
		return agent.WithCode(agent.CodeInvalid, err)
	}
	if err := checkTenant(t.workflowID, t.req); err != nil {
		return err
	}
	if err := t.req.Context.Bounded(); err != nil {
		return err
	}
	return t.req.CheckNotify(parentWorkflowID(ctx))
}

// load routes the request and pins the agent's version; done says the
// turn has ended (rejected, cancelled, or its job already stored).
func (t *turn) load(ctx workflow.Context) (res agent.TurnResult, done bool, err error) {
	// Until the agent is loaded, the turn's timeout is the request's or
	// the default.
	startBy := t.start.Add(time.Duration(cmp.Or(t.req.TimeoutSec, agent.DefaultTurnTimeoutSec)) * time.Second)
	workflow.SetCurrentDetails(ctx, "routing the request")
	var route contract.RouteResult
	err = dbStep(ctx, contract.Route, startBy, contract.RouteInput{
		TenantID: t.req.TenantID, AgentID: t.req.AgentID, Prompt: t.req.Prompt, Context: t.req.Context, Caller: t.req.Caller,
	}, &route)
	if err == nil || !t.cancelled(ctx) {
		for _, h := range t.hooks.route {
			h.routed(ctx, route, err)
		}
	}
	var loaded contract.LoadAgentResult
	if err == nil {
		t.rule = route.Rule
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("loading agent %s", route.AgentID))
		err = dbStep(ctx, contract.LoadAgent, startBy, contract.LoadAgentInput{
			Request: t.req, WorkflowID: t.workflowID, AgentID: route.AgentID,
		}, &loaded)
	}
	switch {
	case err != nil && t.cancelled(ctx):
		res, err = t.finish(ctx, "", t.cancelError())
		return res, true, err
	case err != nil:
		res, err = t.reject(ctx, contract.ErrorOf(err))
		return res, true, err
	case loaded.Existing != nil:
		res, err = t.finishStored(ctx, *loaded.Existing)
		return res, true, err
	}
	t.agent, t.observe = loaded.Agent, loaded.ObserveEvents
	t.model = t.agent.Model
	if m := t.req.Model; m != "" && m != t.agent.Model {
		// The agent allows it (LoadAgent refuses a model it does not):
		// it takes the turn's steps, as a fallback model would.
		t.model, t.calling = m, m
	}
	t.deadline = workflow.Now(ctx).Add(turnTimeout(t.req, t.agent.Limits.WithDefaults()))
	for _, h := range t.hooks.load {
		failure, err := h.loaded(ctx)
		if err != nil {
			return agent.TurnResult{}, true, err
		}
		if failure != nil {
			res, err = t.finish(ctx, "", failure)
			return res, true, err
		}
	}
	return agent.TurnResult{}, false, nil
}

// steps runs the turn's loop under its timeout, then ends the turn, or
// hands it on to its next run.
func (t *turn) steps(ctx workflow.Context) (agent.TurnResult, error) {
	limits := t.agent.Limits.WithDefaults()
	left := t.deadline.Sub(workflow.Now(ctx))
	runCtx, cancel := workflow.WithCancel(ctx)
	workflow.Go(runCtx, func(c workflow.Context) {
		timer := workflow.NewTimerWithOptions(c, max(left, time.Millisecond), workflow.TimerOptions{Summary: "turn timeout"})
		if timer.Get(c, nil) == nil {
			t.timedOut = true
			cancel()
		}
	})
	output, failure := t.loop(runCtx, limits)
	cancel()
	if t.cont.continuing {
		return t.handOn(ctx)
	}
	switch {
	case failure == nil && t.canceled != nil && t.canceled.AtBoundary:
		// The model answered before the next boundary: the turn is done.
	case t.cancelled(ctx):
		failure = t.cancelError()
	case t.timedOut:
		failure = agent.TurnErrorOf(agent.Errorf(agent.CodeTimeout, "turn did not finish within its timeout of %s", turnTimeout(t.req, limits)))
	}
	return t.finish(ctx, output, t.recs.blame(failure, t.agent))
}

// turnTimeout is the turn's timeout: the agent's (limits), or the shorter
// one its request set.
func turnTimeout(req agent.TurnRequest, limits agent.Limits) time.Duration {
	timeout := limits.TurnTimeout()
	if s := req.TimeoutSec; s > 0 && time.Duration(s)*time.Second < timeout {
		timeout = time.Duration(s) * time.Second
	}
	return timeout
}

// loop calls the model and runs the tools it asks for until it answers,
// a limit is reached, a call fails, or the run's history is long enough
// that the turn continues as new (t.cont.continuing).
func (t *turn) loop(ctx workflow.Context, limits agent.Limits) (string, *agent.TurnError) {
	stepsHere := 0
	if p := t.cont.program; p != nil {
		// The previous run handed the turn on in the middle of a program.
		t.cont.program = nil
		if output, failure, stop := t.resumeProgram(ctx, *p, limits); stop {
			return output, failure
		}
	}
	// A repair call is one more than the agent's max_iterations allow.
	for t.iteration < limits.MaxIterations+t.repairs {
		if t.canceled != nil {
			return "", t.cancelError()
		}
		if stepsHere > 0 && t.shouldContinue(ctx, limits) {
			t.cont.continuing = true
			return "", nil
		}
		stepsHere++
		t.iteration++
		first := t.seq + 1 // the step's first message
		for _, h := range t.hooks.step {
			h.beforeStep(ctx)
		}
		reply, err := t.callModel(ctx, limits, t.iteration, first)
		if errors.Is(err, errCutShort) {
			continue
		}
		if err != nil {
			if t.canceled != nil {
				return t.partial, t.cancelError()
			}
			return "", modelFailure(err)
		}
		step := t.took(ctx, reply)
		for _, h := range t.hooks.model {
			if failure := h.afterModel(ctx, step, reply); failure != nil {
				t.finishStep(ctx, step, reply)
				return "", failure
			}
		}
		if len(reply.ToolCalls) == 0 {
			output, failure, again := t.answered(ctx, step, reply, limits)
			if again {
				continue
			}
			return output, failure
		}
		if output, failure, stop := t.tools(ctx, step, reply, limits); stop {
			return output, failure
		}
	}
	return "", agent.TurnErrorOf(agent.Errorf(agent.CodeMaxIterations,
		"the model still asked for tools after %d iterations (the agent's max_iterations)", limits.MaxIterations))
}

// took takes in a model call's reply: its reasoning, its final text, its
// usage; it returns the reply's step.
func (t *turn) took(ctx workflow.Context, reply contract.CallModelResult) int {
	step := t.seq
	if reply.Reasoning != "" {
		t.parts.reasoning = append(t.parts.reasoning, reply.Reasoning)
	}
	// The reply's text is final: its call has completed.
	t.log.AppendText(reply.Content)
	t.unstored = nil
	t.emit(ctx, agent.Event{Kind: agent.EventUsage, Step: step, Usage: &reply.Usage, Model: reply.Model})
	t.usage = t.usage.Add(reply.Usage)
	if reply.Model != "" {
		t.model = reply.Model
	}
	return step
}

// defaultChannel is the channel of a turn whose request names none: it
// was started through Temporal directly, by a Temporal schedule, or as the
// child of another workflow (a process's). agentflow's own starters name
// theirs.
func defaultChannel(ctx workflow.Context) string {
	if _, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(scheduledBy); ok {
		return agent.ChannelSchedule
	}
	if parentWorkflowID(ctx) != "" {
		return agent.ChannelProcess
	}
	return agent.ChannelTemporal
}

// scheduledBy is the search attribute the server sets on a run a
// schedule started: the schedule's id.
var scheduledBy = temporal.NewSearchAttributeKeyKeyword("TemporalScheduledById")

// parentWorkflowID is the id of the workflow that started this one as
// its child, "" when none did.
func parentWorkflowID(ctx workflow.Context) string {
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil {
		return p.ID
	}
	return ""
}

// checkTenant refuses a turn whose workflow id names another tenant than
// its request does: readers (Resume, Approve) trust turn/<tenant>/<job> to
// say whose turn it is. Ids of another form are the starter's own.
func checkTenant(workflowID string, req agent.TurnRequest) error {
	tenant, err := agent.StreamTenant(workflowID)
	if err != nil || tenant == req.TenantID {
		return nil
	}
	return agent.Errorf(agent.CodeInvalid, "workflow id %q belongs to tenant %q, but the request's tenant_id is %q: start a turn as %s",
		workflowID, tenant, req.TenantID, contract.TurnWorkflowID(req.TenantID, "<job_id>"))
}
