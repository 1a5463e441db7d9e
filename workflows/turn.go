package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// Activity options. Local activities are for the cheap steps (a few
// database reads and writes); the model and tools are regular activities
// because they may run long and must survive the worker, unless the agent
// or the tool asks for local ones (agent.ModelLocal, agent.ToolLocal; a
// model call's reply is stored as it ends, so a call run again by another
// worker takes it). Each function returns a new value, so that no caller
// shares a retry policy.

func localOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
			MaximumAttempts:    5,
		},
	}
}

// modelOptions are a CallModel's: a streaming call heartbeats with every
// batch and at least every second, so a lost worker is noticed quickly.
func modelOptions(limits agent.Limits, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: limits.TurnTimeout(),
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    modelAttempts,
		},
		Summary: summary,
	}
}

// modelAttempts is how many attempts a CallModel activity makes at most.
const modelAttempts = 6

func toolRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    3,
	}
}

const (
	toolTimeout = 2 * time.Minute
	// toolHeartbeat is a tool call's heartbeat timeout: ExecuteTool
	// heartbeats every second, so a lost worker is noticed within it, and
	// the SDK sends heartbeats every 0.8 of it (not every 30 s, as without
	// one): a cancellation reaches the call with the next one. Activity
	// options are not part of what replay compares (an activity's id and
	// type are), so runs recorded without it replay as they were.
	toolHeartbeat = 10 * time.Second
	// A local tool's call runs inside the workflow task; the bound keeps a
	// misjudged tool from holding the task (the worker heartbeats it).
	localToolTimeout = 10 * time.Second
)

// AgentTurn (contract.AgentTurn) runs one agent turn: route the request,
// pin the agent's version, call the model and the tools it asks for until
// it answers, and store the result. When the turn cannot complete it fails
// with contract.TurnFailure: a non-retryable application error whose type
// is one of agent.ErrType* and whose details hold the TurnResult (status
// rejected or failed).
func AgentTurn(ctx workflow.Context, req agent.TurnRequest) (agent.TurnResult, error) {
	info := workflow.GetInfo(ctx)
	req.Normalize()
	if req.JobID == "" {
		req.JobID = info.WorkflowExecution.ID
	}
	t := &turn{req: req, workflowID: info.WorkflowExecution.ID, start: workflow.Now(ctx), log: eventlog.New(info.WorkflowExecution.ID)}
	// A child turn's own tool and approval events go to its parent's log.
	parent := ""
	if forwardsEvents(ctx, req) {
		parent = req.Notify
	}
	t.forward = eventlog.NewForwarder(parent, t.workflowID)
	res, err := t.run(ctx)
	// Subscribers polling as the turn ends get every event through its
	// final status before the workflow closes.
	t.log.DrainStream(ctx)
	return res, err
}

type turn struct {
	req        agent.TurnRequest
	workflowID string
	start      time.Time
	deadline   time.Time // the turn's timeout, once the agent is loaded

	agent agent.Agent
	rule  string
	// model is the model the turn called last (the result's llm_model);
	// calling, once a fallback model has taken over, the model its next
	// step calls (callingModel).
	model   string
	calling string
	seq     int // the last step stored for the turn; 0 is the prompt
	usage   agent.Usage
	calls   []agent.ToolCallRecord
	// round is the records of the latest tool round's calls, and
	// afterTools says no model call has started since it ended: a
	// failure then may be the round's doing (blame).
	round      []agent.ToolCallRecord
	afterTools bool

	log      *eventlog.Log
	progress workflow.ReceiveChannel
	appr     approvals
	asks     questions
	// data is what the latest tool round's calls produced last, by ref:
	// the turn's answer rests on it.
	data *agent.DataPreview
	// cacheHit says a tool call's result came from the tenant's cache.
	cacheHit bool
	// reasoning is what the turn's model calls thought, in order, and
	// files the images and files its tool calls produced: the result's
	// blocks, with its JSON and text.
	reasoning []string
	files     []agent.Block

	// canceled is the cancellation asked for, if any; stopModel stops the
	// model call in flight, stopTools the tool calls in flight.
	canceled  *agent.CancelRequest
	stopModel workflow.CancelFunc
	stopTools workflow.CancelFunc
	timedOut  bool // the turn's timeout ended its run
	// partial is what the model call a cancellation stopped had streamed:
	// the turn's partial answer (stopKeepsChange).
	partial string
	// steer receives messages added to the turn (contract.SignalSteer);
	// inbox holds those received and not yet taken in; steers are those
	// taken in that the next model call stores; steered their ids and
	// prompts, in order (steerChange).
	steer    workflow.ReceiveChannel
	inbox    []agent.SteerMessage
	steers   []contract.SteerStep
	steered  []string
	prompted []string
	// unstored are tool calls that did not run whose results no CallModel
	// has stored yet: SaveResult stores them when the turn ends first.
	unstored []contract.ToolFailure

	// toolCalls counts the calls the turn let through its agent's tool
	// limits, in all and by tool (toolLimitsChange).
	toolCalls   int
	toolsCalled map[string]int

	// children receives the batches of the turn's child turns
	// (delegate_to_agent calls); delegations are those children, in the
	// order they started, and delegatedTokens what they used.
	children        workflow.ReceiveChannel
	delegations     []*delegation
	delegatedTokens int
	// forward sends the turn's own events to its parent turn, when it is
	// a child.
	forward *eventlog.Forwarder
	// output is the final answer as JSON, when the turn has an output
	// schema and the answer matched it; repairs counts the calls made to
	// repair an answer that did not (at most one), and repair is what the
	// next model call is to repair (structuredOutputChange).
	output  json.RawMessage
	repairs int
	repair  string
}

func (t *turn) run(ctx workflow.Context) (agent.TurnResult, error) {
	if err := t.startEvents(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	if err := t.startApprovals(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	if err := t.startQuestions(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	t.startCancel(ctx)
	t.startSteer(ctx)
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	if err := t.req.ValidateBase(); err != nil {
		return t.reject(ctx, agent.WithCode(agent.CodeInvalid, err))
	}
	if err := t.req.ValidateEnvelope(); err != nil {
		return t.reject(ctx, agent.WithCode(agent.CodeInvalid, err))
	}
	if err := t.checkTenant(ctx); err != nil {
		return t.reject(ctx, err)
	}
	if err := t.req.Context.Bounded(); err != nil {
		return t.reject(ctx, err)
	}
	if err := t.req.CheckNotify(parentWorkflowID(ctx)); err != nil {
		return t.reject(ctx, err)
	}

	// Until the agent is loaded, the turn's timeout is the request's or
	// the default.
	startBy := t.start.Add(time.Duration(cmp.Or(t.req.TimeoutSec, agent.DefaultTurnTimeoutSec)) * time.Second)
	workflow.SetCurrentDetails(ctx, "routing the request")
	var route contract.RouteResult
	err := dbStep(ctx, contract.Route, startBy, contract.RouteInput{
		TenantID: t.req.TenantID, AgentID: t.req.AgentID, Prompt: t.req.Prompt, Context: t.req.Context, Caller: t.req.Caller,
	}, &route)
	if err != nil {
		if t.cancelled(ctx) {
			return t.finish(ctx, "", t.cancelError())
		}
		t.recordRoute(ctx, route, err)
		return t.reject(ctx, contract.ErrorOf(err))
	}
	t.rule = route.Rule
	t.recordRoute(ctx, route, nil)

	workflow.SetCurrentDetails(ctx, fmt.Sprintf("loading agent %s", route.AgentID))
	var loaded contract.LoadAgentResult
	err = dbStep(ctx, contract.LoadAgent, startBy, contract.LoadAgentInput{
		Request: t.req, WorkflowID: t.workflowID, AgentID: route.AgentID,
	}, &loaded)
	if err != nil {
		if t.cancelled(ctx) {
			return t.finish(ctx, "", t.cancelError())
		}
		return t.reject(ctx, contract.ErrorOf(err))
	}
	if ex := loaded.Existing; ex != nil {
		return t.finishStored(ctx, *ex)
	}
	t.agent = loaded.Agent
	t.model = t.agent.Model
	if m := t.req.Model; m != "" && m != t.agent.Model {
		// The agent allows it (LoadAgent refuses a model it does not):
		// it takes the turn's steps, as a fallback model would.
		t.model, t.calling = m, m
	}
	if err := t.upsertSearch(ctx); err != nil {
		return agent.TurnResult{}, err
	}
	if t.cancelled(ctx) {
		return t.finish(ctx, "", t.cancelError())
	}

	limits := t.agent.Limits.WithDefaults()
	timeout := limits.TurnTimeout()
	if s := t.req.TimeoutSec; s > 0 && time.Duration(s)*time.Second < timeout {
		timeout = time.Duration(s) * time.Second
	}
	t.deadline = workflow.Now(ctx).Add(timeout)
	runCtx, cancel := workflow.WithCancel(ctx)
	workflow.Go(runCtx, func(c workflow.Context) {
		timer := workflow.NewTimerWithOptions(c, timeout, workflow.TimerOptions{Summary: "turn timeout"})
		if timer.Get(c, nil) == nil {
			t.timedOut = true
			cancel()
		}
	})
	output, failure := t.loop(runCtx, limits)
	cancel()
	switch {
	case failure == nil && t.canceled != nil && t.canceled.AtBoundary:
		// The model answered before the next boundary: the turn is done.
	case t.cancelled(ctx):
		failure = t.cancelError()
	case t.timedOut:
		failure = agent.TurnErrorOf(agent.Errorf(agent.CodeTimeout, "turn did not finish within its timeout of %s", timeout))
	}
	return t.finish(ctx, output, t.blame(failure))
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
func (t *turn) checkTenant(ctx workflow.Context) error {
	tenant, err := agent.StreamTenant(t.workflowID)
	if err != nil || tenant == t.req.TenantID {
		return nil
	}
	return agent.Errorf(agent.CodeInvalid, "workflow id %q belongs to tenant %q, but the request's tenant_id is %q: start a turn as %s",
		t.workflowID, tenant, t.req.TenantID, contract.TurnWorkflowID(t.req.TenantID, "<job_id>"))
}

// loop calls the model and runs the tools it asks for until it answers,
// a limit is reached or a call fails.
func (t *turn) loop(ctx workflow.Context, limits agent.Limits) (string, *agent.TurnError) {
	// A repair call is one more than the agent's max_iterations allow.
	for i := 1; i <= limits.MaxIterations+t.repairs; i++ {
		if t.canceled != nil {
			return "", t.cancelError()
		}
		t.takeSteers(ctx)
		reply, err := t.callModel(ctx, limits, i)
		if err != nil {
			if t.canceled != nil {
				return t.partial, t.cancelError()
			}
			return "", modelFailure(err)
		}
		step := t.seq
		if reply.Reasoning != "" {
			t.reasoning = append(t.reasoning, reply.Reasoning)
		}
		// The reply's text is final: its call has completed.
		t.log.AppendText(reply.Content)
		t.unstored = nil
		t.emit(ctx, agent.Event{Kind: agent.EventUsage, Step: step, Usage: &reply.Usage, Model: reply.Model})
		t.usage = t.usage.Add(reply.Usage)
		if reply.Model != "" {
			t.model = reply.Model
		}
		t.recordModel(ctx, t.model, reply.Usage)
		if err := t.overBudget(limits); err != nil {
			t.finishStep(ctx, step, reply)
			return "", err
		}
		if len(reply.ToolCalls) == 0 {
			t.finishStep(ctx, step, reply)
			if t.receiveSteers(ctx) && i < limits.MaxIterations+t.repairs {
				// A message came while the model answered: it answers
				// again, having read it. (With no iteration left, the
				// turn ends and its conversation answers the message.)
				continue
			}
			if reply.OutputProblems == "" {
				t.output = reply.OutputJSON
				return reply.Content, nil
			}
			if t.repairs > 0 {
				return "", agent.TurnErrorOf(agent.Errorf(agent.CodeInvalidOutput,
					"the model's answer does not match the output schema, also after a repair: %s", agent.Clip(reply.OutputProblems, 1000)))
			}
			workflow.GetLogger(ctx).Info("answer does not match the output schema; repairing it", "problems", reply.OutputProblems)
			t.repairs, t.repair = 1, reply.OutputProblems
			continue
		}
		if t.canceled != nil && t.canceled.AtBoundary {
			// Stopped at this boundary: the reply's calls do not run, and
			// each is answered so (SaveResult stores them).
			t.unstored = notRun(t.seq, reply.ToolCalls)
			t.seq += len(reply.ToolCalls)
			t.finishStep(ctx, step, reply)
			return reply.Content, t.cancelError()
		}
		t.unstored = t.runTools(ctx, reply.ToolCalls, reply.Approvals, limits)
		// Every call of the step has ended (runTools waits for them all),
		// however it ended.
		t.finishStep(ctx, step, reply)
		if t.canceled != nil {
			return "", t.cancelError()
		}
		if ctx.Err() != nil {
			return "", modelFailure(ctx.Err())
		}
		// The agents the turn delegated to spent its tokens too.
		if err := t.overBudget(limits); err != nil {
			return "", err
		}
	}
	return "", agent.TurnErrorOf(agent.Errorf(agent.CodeMaxIterations,
		"the model still asked for tools after %d iterations (the agent's max_iterations)", limits.MaxIterations))
}

// finishStep logs step_finish for the step whose model call answered with
// reply, in runs that log the vocabulary: the call's usage, and why the
// model stopped. A reason the provider did not give, or one no client
// could take, is told from the reply.
func (t *turn) finishStep(ctx workflow.Context, step int, reply contract.CallModelResult) {
	usage := reply.Usage
	e := agent.Event{Kind: agent.EventStepFinish, Step: step, Usage: &usage, FinishReason: reply.FinishReason, Model: reply.Model}
	if e.FinishReason == "" || e.Validate() != nil {
		e.FinishReason = agent.FinishStop
		if len(reply.ToolCalls) > 0 {
			e.FinishReason = agent.FinishToolCalls
		}
	}
	t.emit(ctx, e)
}

// overBudget is the turn's failure once it has used more tokens than its
// budget (the agent's, or the lower one its request set).
func (t *turn) overBudget(limits agent.Limits) *agent.TurnError {
	b := t.req.Budget(limits)
	if b <= 0 || t.usage.TotalTokens <= b {
		return nil
	}
	whose := "the agent's budget"
	if b != limits.TokenBudget {
		whose = "the budget its request set"
	}
	msg := fmt.Sprintf("turn used %d tokens; %s is %d", t.usage.TotalTokens, whose, b)
	if t.delegatedTokens > 0 {
		msg = fmt.Sprintf("turn used %d tokens (%d of them by the agents it delegated to); %s is %d", t.usage.TotalTokens, t.delegatedTokens, whose, b)
	}
	return agent.TurnErrorOf(agent.Errorf(agent.CodeTokenBudget, "%s", msg))
}

// callModel runs iteration i's CallModel as the turn's next step, taking
// its token batches into the event log while it runs. A cancellation of
// the turn stops the call. When the call fails for good with an error
// the agent falls back on, the step calls the agent's next fallback
// model (fallback), and so on down its list; the model that answered
// takes the turn's later steps (callingModel), so that an outage costs
// the turn its retries once, not at every step.
func (t *turn) callModel(ctx workflow.Context, limits agent.Limits, i int) (contract.CallModelResult, error) {
	// A child turn's parent gets the call's tokens after its tool events.
	t.forward.Flush(ctx)
	model := t.callingModel()
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
	t.afterTools = false
	t.emit(ctx, agent.Event{Kind: agent.EventStepStart, Step: t.seq})
	t.log.OpenStep(t.seq)
	defer t.log.CloseStep()
	in := contract.CallModelInput{
		TenantID: t.req.TenantID, JobID: t.req.JobID,
		AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		SessionID: t.req.SessionID, History: t.req.History,
		Seq: t.seq, ToolFailures: t.unstored,
		Stream: t.req.Streaming(), StreamID: t.workflowID, FirstIndex: t.log.Next(), Notify: t.req.Notify,
		Context: t.req.Context, Caller: t.req.Caller, TailInResult: t.req.Notify == "",
		OutputSchema: t.req.OutputSchema, Repair: repair, Steer: t.steers,
		// A Workflow Streams subscriber polls the log, so it gets the
		// batches as signals, as they stream.
		LiveFirst: t.req.Notify == "" && !t.log.Polled(),
	}
	t.steers = nil
	for {
		if model != t.agent.Model {
			in.Model = model
		}
		in.Live = t.log.HandOn(t.req.Streaming())
		var reply contract.CallModelResult
		err := t.awaitModel(ctx, t.startModel(mctx, limits, in, fmt.Sprintf("%s · iteration %d", model, i)), &reply)
		if err == nil {
			return reply, nil
		}
		next := t.fallback(ctx, model, err)
		if next == "" {
			t.seal(ctx, in)
			if t.canceled != nil {
				// Stopped while it wrote: what it had written is the
				// turn's partial answer (stopKeepsChange).
				t.partial = t.log.TextFrom(in.FirstIndex)
			}
			return reply, err
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("calling %s after %s failed (iteration %d of at most %d)", next, model, i, limits.MaxIterations))
		// The fallback's attempts follow the failed call's: its first
		// voids what they streamed (from the step's first index on).
		model, in.AttemptBase = next, in.AttemptBase+modelAttempts
		t.model, t.calling = next, next
	}
}

// startModel starts a model call: a local activity when the agent asks
// for it (agent.ModelLocal) and the call streams, if at all, live first,
// else an activity. A call that streams into the log (a parent turn or a
// process is notified, or a Workflow Streams subscriber polls the log)
// stays an activity: the log takes its batches as they come, between
// workflow tasks, which a local call would hold back until it is done.
// The choice rests on what the history holds (the pinned agent version,
// the request, a subscriber's polls), so a replay makes it again.
func (t *turn) startModel(ctx workflow.Context, limits agent.Limits, in contract.CallModelInput, summary string) workflow.Future {
	opts := modelOptions(limits, summary)
	if t.agent.LocalModelCalls() && (!in.Stream || in.LiveFirst) {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: opts.StartToCloseTimeout,
			RetryPolicy:         opts.RetryPolicy,
			Summary:             opts.Summary,
		}), contract.CallModel, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.CallModel, in)
}

// seal takes into the log what a live-first call that failed for good, or
// was stopped, showed its followers (contract.SealStream): they have seen
// it at the indices the turn would otherwise give its next events. The
// text stays, as a signalled call's does; a fallback's call voids it
// itself.
func (t *turn) seal(ctx workflow.Context, in contract.CallModelInput) {
	if !in.Stream || !in.LiveFirst {
		return
	}
	// A stopped turn still seals: its context is canceled.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	var b *agent.TokenBatch
	err := dbStep(dctx, contract.SealStream, t.deadline, contract.SealStreamInput{
		StreamID: t.workflowID, Step: in.Seq, From: t.log.Next(), VoidFrom: in.FirstIndex}, &b)
	if err != nil {
		workflow.GetLogger(ctx).Warn("sealing the stream failed", "step", in.Seq, "error", contract.ErrorOf(err).Message)
		return
	}
	if b != nil {
		t.log.AcceptTail(ctx, b, b.First+int64(len(b.Events))-1)
	}
}

// callingModel is the model the turn's next step calls: the agent's own,
// or the fallback model that last took over from it.
func (t *turn) callingModel() string {
	if t.calling != "" {
		return t.calling
	}
	return t.agent.Model
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

// runTools runs one reply's tool calls in parallel, one activity (or
// local activity, for local tools) each, and returns the calls that failed
// for good (their results are stored by the next CallModel). Calls whose
// tool's policy asks for approval wait for a decision first; a rejected or
// timed-out call fails with a message the model reads as the tool's result.
func (t *turn) runTools(ctx workflow.Context, calls []agent.ToolCall, needs []contract.ApprovalNeed, limits agent.Limits) []contract.ToolFailure {
	t.data = nil
	r := &toolRound{t: t, calls: calls, futures: make([]workflow.Future, len(calls)), refused: make([]*agent.ToolEvent, len(calls)),
		local: make([]*workflow.LocalActivityOptions, len(calls)), in: make([]contract.ExecuteToolInput, len(calls)), limits: limits}
	// A cancellation of the turn stops the round's calls in flight
	// (requestCancel).
	var stop workflow.CancelFunc
	r.callCtx, stop = workflow.WithCancel(ctx)
	t.stopTools = stop
	defer func() {
		t.stopTools = nil
		stop()
	}()
	for _, c := range calls {
		if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindDelegate {
			r.delegations++
		}
	}
	var names []string
	var waiting []int
	for i, c := range calls {
		if msg := t.overToolLimit(ctx, c); msg != "" {
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
		waiting = t.decideByGrants(ctx, calls, waiting, needs, decide)
	}
	if len(waiting) > 0 {
		t.awaitApprovals(ctx, calls, waiting, needs, limits, decide)
	}
	first := len(t.calls)
	failures := r.collect(ctx)
	t.seq += len(calls)
	t.round, t.afterTools = t.calls[first:], true
	return failures
}

// toolRound is one reply's tool calls: the future of each call started,
// the tool_end of each call refused.
type toolRound struct {
	t       *turn
	calls   []agent.ToolCall
	futures []workflow.Future
	refused []*agent.ToolEvent
	// local holds the options of each local call, to run it again after a
	// database outage; nil for calls that run as activities.
	local []*workflow.LocalActivityOptions
	in    []contract.ExecuteToolInput
	// limits are the turn's; delegations counts the round's
	// delegate_to_agent calls, which share the tokens the turn has left.
	limits      agent.Limits
	delegations int
	// callCtx is the context the round's tool calls run in, which a
	// cancellation of the turn cancels.
	callCtx workflow.Context
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
	in := contract.ExecuteToolInput{
		TenantID: t.req.TenantID, JobID: t.req.JobID,
		AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		Seq: t.seq + 1 + i, Call: c, SessionID: t.req.SessionID,
	}
	summary := contract.OneLine(c.Name+" "+c.Arguments, 120)
	r.in[i] = in
	if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindDelegate {
		r.delegate(ctx, i, spec)
		return
	}
	if spec, ok := t.agent.Tool(c.Name); ok && spec.Kind == agent.KindAskUser {
		r.ask(ctx, i, spec)
		return
	}
	if spec, ok := t.agent.Tool(c.Name); ok && spec.IsLocal() {
		opts := workflow.LocalActivityOptions{
			StartToCloseTimeout: localToolTimeout,
			RetryPolicy:         toolRetry(),
			Summary:             summary,
		}
		r.local[i] = &opts
		r.futures[i] = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(r.callCtx, opts), contract.ExecuteTool, in)
		return
	}
	actx := workflow.WithActivityOptions(r.callCtx, workflow.ActivityOptions{
		StartToCloseTimeout: toolTimeout,
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
	var failures []contract.ToolFailure
	for i, c := range r.calls {
		rec := agent.ToolCallRecord{CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments)}
		fail := func(status, msg string) {
			rec.Status = status
			failures = append(failures, contract.ToolFailure{Seq: t.seq + 1 + i, CallID: c.ID, Tool: c.Name, Message: msg})
		}
		switch f := r.futures[i]; {
		case r.refused[i] != nil:
			fail(r.refused[i].Status, r.refused[i].Output)
		case f == nil && t.canceled != nil:
			fail(agent.ToolCanceled, "the turn was cancelled before the call ran")
		case f == nil:
			// The turn ended (its timeout) while the call waited.
			fail(agent.ToolError, "the turn ended before the call was decided")
		default:
			var res contract.ExecuteToolResult
			end := agent.ToolEvent{CallID: c.ID, Name: c.Name}
			t.awaitTool(ctx, f)
			err := f.Get(ctx, &res)
			if opts := r.local[i]; err != nil && opts != nil {
				// A local call that could not reach the database runs
				// again once it is back (a regular activity waits inside).
				err = outlast(workflow.WithLocalActivityOptions(r.callCtx, *opts), contract.ExecuteTool, t.deadline, r.in[i], &res, err, unavailable)
			}
			if err != nil {
				status, msg := agent.ToolError, contract.ErrorOf(err).Message
				if t.canceled != nil && contract.ErrorOf(err).Code == agent.CodeCanceled {
					status, msg = agent.ToolCanceled, "the turn was cancelled while the call ran"
				}
				rec.Step = contract.StepOf(err)
				fail(status, msg)
				end.Status, end.Output = status, contract.OneLine(msg, 200)
			} else {
				rec.Status, rec.CacheHit, rec.Step = res.Status, res.CacheHit, res.Step
				t.cacheHit = t.cacheHit || res.CacheHit
				end.Status, end.Output, end.Data = res.Status, contract.OneLine(res.Preview, 200), res.Data
				if res.Data != nil {
					t.data = res.Data
				}
				for _, p := range res.Parts {
					t.files = append(t.files, agent.Block{Type: p.Type, Ref: p.URL, MIMEType: p.MIMEType, Name: p.Name, CallID: c.ID})
				}
			}
			t.emit(ctx, agent.Event{Kind: agent.EventToolEnd, Tool: &end})
		}
		t.calls = append(t.calls, rec)
		t.recordTool(ctx, rec)
	}
	return failures
}

func reasonFor(needs []contract.ApprovalNeed, callID string) string {
	for _, n := range needs {
		if n.CallID == callID {
			return n.Reason
		}
	}
	return ""
}

// finish stores the result and returns it, or fails the workflow with it.
func (t *turn) finish(ctx workflow.Context, output string, failure *agent.TurnError) (agent.TurnResult, error) {
	res := agent.TurnResult{
		Version:     agent.ProtocolVersion,
		JobID:       t.req.JobID,
		Status:      agent.StatusCompleted,
		Output:      output,
		CompletedAt: workflow.Now(ctx),
		Metadata: agent.ResultMetadata{
			AgentID:         t.agent.ID,
			AgentVersion:    t.agent.Version,
			RouteRule:       t.rule,
			ToolCalls:       t.calls,
			TokensUsed:      t.usage.TotalTokens,
			CacheHit:        t.cacheHit || t.usage.CachedTokens > 0,
			CachedTokens:    t.usage.CachedTokens,
			ExecutionTimeMS: workflow.Now(ctx).Sub(t.start).Milliseconds(),
			LLMModel:        t.model,
		},
	}
	if res.Metadata.ToolCalls == nil {
		res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	}
	res.Steered = t.steered
	switch {
	case failure != nil && failure.Type == agent.ErrTypeCanceled:
		res.Status, res.Output, res.Error = agent.StatusCanceled, "", failure
		if output != "" && (t.canceled == nil || !t.canceled.Discard) {
			res.Output, res.Partial, res.ResultPreview = output, true, textPreview(output)
		}
	case failure != nil:
		res.Status, res.Output, res.Error = agent.StatusFailed, "", failure
	case t.data != nil:
		res.DataRef = t.data.Ref
		res.ResultPreview = dataPreview(*t.data)
		res.OutputJSON = t.output
	case t.output != nil:
		res.OutputJSON = t.output
		res.ResultPreview = jsonPreview(t.output)
	default:
		res.ResultPreview = textPreview(output)
	}

	workflow.SetCurrentDetails(ctx, "saving the result")
	// The turn's own context may be cancelled by its timeout; saving must
	// still happen, however long the database is away: the work is done.
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	var saved agent.TurnResult
	err := dbStep(sctx, contract.SaveResult, time.Time{}, contract.SaveResultInput{
		Request: t.req, WorkflowID: t.workflowID, Result: res, ToolFailures: t.unstored,
		Reasoning: agent.Clip(strings.Join(t.reasoning, "\n\n"), agent.MaxResultReasoningBytes), Files: t.files,
		Steered: t.prompted,
	}, &saved)
	if err != nil {
		return agent.TurnResult{}, err
	}
	return t.finishStored(ctx, saved)
}

// finishStored ends the workflow with a stored result.
func (t *turn) finishStored(ctx workflow.Context, res agent.TurnResult) (agent.TurnResult, error) {
	defer t.forward.Flush(ctx)
	t.recordEnd(ctx, res.Status, res.Error)
	if res.Status == agent.StatusCompleted {
		workflow.SetCurrentDetails(ctx, "completed")
		// A result stored with blocks is told block by block; one stored
		// before blocks were kept (its history says so), by its text.
		if len(res.Blocks) == 0 {
			t.emit(ctx, agent.Event{Kind: agent.EventContent, Content: textBlock(res.Output)})
		}
		for _, b := range res.Blocks {
			t.emit(ctx, agent.Event{Kind: agent.EventContent, Content: blockJSON(b)})
		}
		t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})
		// Followers end with what the close carries (the value returned
		// is not compared on replay: old runs replay as they were).
		res.StreamTail = t.log.Tail(t.req.Streaming())
		return res, nil
	}
	if res.Error == nil {
		res.Error = &agent.TurnError{Type: agent.ErrTypeInternal, Message: "turn failed without an error"}
	}
	if res.Status == agent.StatusCanceled {
		workflow.SetCurrentDetails(ctx, "canceled: "+res.Error.Message)
		// A partial answer (stopKeepsChange) is told as what the turn
		// answered, marked so, before the end.
		if res.Partial {
			for _, b := range res.Blocks {
				t.emit(ctx, agent.Event{Kind: agent.EventContent, Content: blockJSON(b)})
			}
		}
		t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: res.Error})
		return agent.TurnResult{}, contract.TurnCanceled(res)
	}
	workflow.SetCurrentDetails(ctx, "failed: "+res.Error.Message)
	t.emit(ctx, agent.Event{Kind: agent.EventError, Error: res.Error})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: res.Error})
	return agent.TurnResult{}, contract.TurnFailure(res)
}

// reject fails a turn that could not start: nothing was stored.
func (t *turn) reject(ctx workflow.Context, err error) (agent.TurnResult, error) {
	e := agent.TurnErrorOf(err)
	workflow.GetLogger(ctx).Info("turn rejected", "type", e.Type, "error", e.Message)
	workflow.SetCurrentDetails(ctx, "rejected: "+e.Message)
	res := agent.TurnResult{
		Version:     agent.ProtocolVersion,
		JobID:       t.req.JobID,
		Status:      agent.StatusRejected,
		Error:       e,
		CompletedAt: workflow.Now(ctx),
	}
	res.Metadata.ToolCalls = []agent.ToolCallRecord{}
	t.recordEnd(ctx, res.Status, res.Error)
	t.emit(ctx, agent.Event{Kind: agent.EventError, Error: res.Error})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: res.Error})
	t.forward.Flush(ctx)
	return agent.TurnResult{}, contract.TurnFailure(res)
}

// blame names the tool call that caused a failure, when one did
// (agent.TurnError.Tool, Step): the call of the latest tool round the
// turn's timeout interrupted; the delegation of that round whose tokens
// took the turn over its budget; the failing call of the last round when
// the model was still calling tools at max_iterations. A failure in a
// model call, or one a person caused (a cancellation), names none.
func (t *turn) blame(failure *agent.TurnError) *agent.TurnError {
	if failure == nil || !t.afterTools || failure.Tool != "" {
		return failure
	}
	var rec *agent.ToolCallRecord
	switch failure.Type {
	case agent.ErrTypeTimeout:
		rec = t.roundCall(func(r agent.ToolCallRecord) bool { return r.Status != agent.ToolOK })
	case agent.ErrTypeTokenBudget:
		rec = t.roundCall(func(r agent.ToolCallRecord) bool {
			spec, ok := t.agent.Tool(r.Tool)
			return ok && spec.Kind == agent.KindDelegate
		})
	case agent.ErrTypeMaxIterations:
		for i := len(t.round) - 1; i >= 0 && rec == nil; i-- {
			if t.round[i].Status != agent.ToolOK {
				rec = &t.round[i]
			}
		}
	}
	if rec == nil {
		return failure
	}
	out := *failure
	out.Tool, out.Step = rec.Tool, rec.Step
	return &out
}

// roundCall is the first call of the latest tool round that match
// holds for, nil when none.
func (t *turn) roundCall(match func(agent.ToolCallRecord) bool) *agent.ToolCallRecord {
	for i := range t.round {
		if match(t.round[i]) {
			return &t.round[i]
		}
	}
	return nil
}

// upsertSearch sets the turn's search attributes in one command, whatever
// the starter set: what a history shows of the start's attributes differs
// between servers, so the workflow must not branch on it.
func (t *turn) upsertSearch(ctx workflow.Context) error {
	attrs := []temporal.SearchAttributeUpdate{contract.SearchTenant.ValueSet(t.req.TenantID), contract.SearchAgent.ValueSet(t.agent.ID)}
	if t.req.SessionID != "" {
		attrs = append(attrs, contract.SearchSession.ValueSet(t.req.SessionID))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		return fmt.Errorf("set search attributes: %w", err)
	}
	return nil
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

// textPreview is the result_preview of a text answer.
func textPreview(s string) json.RawMessage {
	p := preview{Type: "text", Chars: len([]rune(s)), Text: contract.OneLine(s, 200)}
	// Marshalling a struct of strings and ints is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// jsonPreview is the result_preview of an answer that matched the turn's
// output schema: the JSON, in one line.
func jsonPreview(out json.RawMessage) json.RawMessage {
	p := preview{Type: "json", Chars: len([]rune(string(out))), Text: contract.OneLine(string(out), 200)}
	// Marshalling a struct of strings and ints is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// dataPreview is the result_preview of an answer that rests on data.
func dataPreview(p agent.DataPreview) json.RawMessage {
	// Marshalling a struct of strings, ints and raw JSON is deterministic.
	b, _ := json.Marshal(p) //workflowcheck:ignore
	return b
}

// textBlock is the content block of a text answer.
func textBlock(s string) json.RawMessage {
	b := block{Type: "text", Text: s}
	// Marshalling a struct of strings is deterministic.
	out, _ := json.Marshal(b) //workflowcheck:ignore
	return out
}

// blockJSON is a content event's block.
func blockJSON(b agent.Block) json.RawMessage {
	// Marshalling a struct of strings and raw JSON is deterministic.
	out, _ := json.Marshal(b) //workflowcheck:ignore
	return out
}

type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type preview struct {
	Type  string `json:"type"`
	Chars int    `json:"chars"`
	Text  string `json:"text"`
}

// overToolLimit says why call c is not run when it would take the turn
// past its agent's tool limits (toolLimitsChange), and counts it when it
// is not; "" for a call within them.
func (t *turn) overToolLimit(ctx workflow.Context, c agent.ToolCall) string {
	lim := t.agent.ToolLimits()
	if lim == nil {
		return ""
	}
	if lim.PerTurn > 0 && t.toolCalls >= lim.PerTurn {
		return fmt.Sprintf("the call was not run: this agent makes at most %d tool calls a turn, and has made them; answer with what you have", lim.PerTurn)
	}
	if n, ok := lim.PerTool[c.Name]; ok && t.toolsCalled[c.Name] >= n {
		return fmt.Sprintf("the call was not run: %s may be called at most %d times a turn, and has been; answer with what you have", c.Name, n)
	}
	if t.toolsCalled == nil {
		t.toolsCalled = map[string]int{}
	}
	t.toolCalls++
	t.toolsCalled[c.Name]++
	return ""
}
