package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/words"
)

// The turn is a small core — check, route, load, the model and its tools
// in a loop, save (turn.go, model.go, tools.go, result.go) — and
// components, one per feature, each in its own file. A component owns its
// state and the methods that act on it (the turn embeds it, so the
// components reach each other's by name), registers its signal, update
// and query handlers when a run starts, and hands the turn's next run
// what it needs of its state when the turn continues as new
// (contract.TurnCarry). A component whose methods read the core's state
// (its request, agent, steps or log) keeps the turn it started for (its
// field t); the others are given what they read. Adding a feature is a
// file with its component and a line in components.
//
// The core reaches a feature through its stage hooks, not by name: at
// each stage of a turn it calls, in the components' order, those that
// implement the stage's interface (stageHooks), so that a feature that
// acts at a stage is a component with that method, and the core does not
// change. The hooks run in workflow code, at the same points of every
// run and replay: what they start (activities, search attributes,
// events) is recorded where the core's own call of it was.
type component interface {
	// start registers the component's handlers for this run and takes
	// back what the previous run carried (nil on a turn's first run).
	start(ctx workflow.Context, t *turn, carried *contract.TurnCarry) error
	// carry writes what the next run needs of the component's state.
	carry(c *contract.TurnCarry) error
}

// The stages a component may act at, in a turn's order. Those that
// return a failure end the turn with it; the stage's later hooks do not
// run.
type (
	// routeHook: the request was routed (err: it could not be; not
	// called when a cancellation stopped the routing).
	routeHook interface {
		routed(ctx workflow.Context, route contract.RouteResult, err error)
	}
	// loadHook: the agent is loaded and the turn's deadline set, on the
	// turn's first run, before its first step. A failure ends the turn
	// (its result stored); an error fails the workflow.
	loadHook interface {
		loaded(ctx workflow.Context) (*agent.TurnError, error)
	}
	// stepHook: a model step is about to call the model (its first
	// message is at the turn's next seq).
	stepHook interface {
		beforeStep(ctx workflow.Context)
	}
	// callHook: the step's model call is about to start, its input
	// made (first: the seq of the step's first message); the component
	// adds its part.
	callHook interface {
		beforeCall(in *contract.CallModelInput, first int)
	}
	// cutHook: the step's model call failed with err; true says the
	// component stopped it on purpose and the turn goes on to its next
	// step (errCutShort).
	cutHook interface {
		cutShort(ctx workflow.Context, err error, in contract.CallModelInput) bool
	}
	// modelHook: the step's model call answered, its reply taken in.
	modelHook interface {
		afterModel(ctx workflow.Context, step int, reply contract.CallModelResult) *agent.TurnError
	}
	// answerHook: the model answered without tool calls; true has it
	// answer again (every hook runs), iterations allowing.
	answerHook interface {
		answerAgain(ctx workflow.Context) bool
	}
	// admitHook: a tool call of the model's (a program's too) is about
	// to run; a message refuses it, and the model reads it as the call's
	// result. The first hook that refuses decides.
	admitHook interface {
		refuse(c agent.ToolCall) string
	}
	// toolHook: one tool call ended (a program's calls too), recorded.
	toolHook interface {
		afterTool(ctx workflow.Context, rec agent.ToolCallRecord)
	}
	// roundHook: a step's tool round ended, and the turn goes on.
	roundHook interface {
		afterTools(ctx workflow.Context) *agent.TurnError
	}
	// saveHook: the turn's result is about to be stored (SaveResult):
	// the component adds its part of the input.
	saveHook interface {
		beforeSave(in *contract.SaveResultInput)
	}
	// endHook: the turn ended with res, stored or rejected.
	endHook interface {
		ended(ctx workflow.Context, res agent.TurnResult)
	}
)

// stageHooks are the turn's components that act at each stage, in the
// components' order, found once when the run starts.
type stageHooks struct {
	route  []routeHook
	load   []loadHook
	step   []stepHook
	call   []callHook
	cut    []cutHook
	model  []modelHook
	answer []answerHook
	admit  []admitHook
	tool   []toolHook
	round  []roundHook
	save   []saveHook
	end    []endHook
}

func hooksOf(cs []component) stageHooks {
	return stageHooks{
		route: having[routeHook](cs), load: having[loadHook](cs), step: having[stepHook](cs), call: having[callHook](cs),
		cut: having[cutHook](cs), model: having[modelHook](cs), answer: having[answerHook](cs), admit: having[admitHook](cs),
		tool: having[toolHook](cs), round: having[roundHook](cs), save: having[saveHook](cs), end: having[endHook](cs),
	}
}

// having are the components that implement H.
func having[H any](cs []component) []H {
	var out []H
	for _, c := range cs {
		if h, ok := c.(H); ok {
			out = append(out, h)
		}
	}
	return out
}

// refusal is why the first of hs that refuses call c does; "" when none
// does.
func refusal(hs []admitHook, c agent.ToolCall) string {
	for _, h := range hs {
		if msg := h.refuse(c); msg != "" {
			return msg
		}
	}
	return ""
}

// components are the turn's, in the order they start and their hooks
// run: the event log first, as the others log to it; the search
// attributes before the cancellation, which a loaded turn checks after
// setting them, and that before the prepare phase.
func (t *turn) components() []component {
	return []component{
		&t.logging,     // events.go: the event log, tool progress, forwarding to a parent
		&t.searchAttrs, // search.go: the turn's search attributes (loaded)
		&t.stopper,     // cancel.go: cancel_turn, stopping what runs (loaded)
		&t.steering,    // steer.go: messages added to the running turn (beforeStep, beforeCall, cutShort, answerAgain, beforeSave)
		&t.waits,       // approval.go, question.go: calls waiting for a person
		&t.delegating,  // delegate.go: child turns
		&t.modelPolicy, // model.go: override, fallback, repair
		&t.toolLimits,  // toollimits.go: calls per turn and per tool (refuse)
		&t.turnContext, // context.go: which steps a model call reads whole (beforeCall)
		&t.preparing,   // prepare.go: the agent's prepare phase (loaded)
		&t.metering,    // metrics.go: the turn's metrics (routed, afterModel, afterTool, ended)
		&t.tokenBudget, // budget.go: the turn's token budget (afterModel, afterTools)
		&t.delivering,  // delivery.go: the result's deliver targets (beforeSave)
	}
}

// Continuing as new. A turn's run hands the turn on at a step boundary —
// after a tool round, before the next model call — when its history has
// reached the agent's HistoryEvents, or half of Temporal's 50 MB, or the
// server suggests it. Nothing runs or waits for a person there, so what
// the next run needs is state: the core's (the pinned agent, the steps,
// the usage, the tool records) and each component's. The next run does
// not route or load again; its log goes on from the same index and
// offset. A run makes at least one step, so a turn always moves on.

// maxRunHistoryBytes bounds a run's history in bytes as HistoryEvents
// bounds its events: a turn whose tools return large outputs (they
// travel by reference, but their previews and arguments do not) hands on
// before it nears Temporal's 50 MB.
const maxRunHistoryBytes = 4 << 20

// shouldContinue reports whether the run hands the turn on before its
// next step. An answer cut short (steering.cut) is stored by the next
// call, in this run: it is not carried.
func (t *turn) shouldContinue(ctx workflow.Context, limits agent.Limits) bool {
	if t.cut != nil {
		return false
	}
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() || info.GetCurrentHistorySize() >= maxRunHistoryBytes {
		return true
	}
	return t.clock.historyLength(ctx) >= limits.HistoryEvents && !t.awaitsSubscribers(ctx)
}

// awaitsSubscribers reports whether the turn's first run keeps its whole
// log for Workflow Streams subscribers still to come: the turn asked for
// a window (agent.TurnRequest.StreamWindowSec), it has not passed, and no
// one has polled yet. A subscriber whose first poll comes within the
// window gets every item (eventlog's streams.go), and a later run holds
// only the log's tail. A run of local calls may reach its history bound
// within its first workflow task, before any poll can reach it (a poll
// comes in at a task's heartbeat), so the bound waits for the window;
// Temporal's own suggestion and the size bound do not.
func (t *turn) awaitsSubscribers(ctx workflow.Context) bool {
	w := t.req.StreamWindow()
	return t.cont.runs == 0 && w > 0 && t.log != nil && !t.log.Polled() && workflow.Now(ctx).Before(t.start.Add(w))
}

// taskClock is where the run's workflow task stands: local counts the
// local activities the run started since the history length read at
// lengthSeen (historyLength); taskStart is when the task started, as
// workflow time tells it (historyLength notes it with each new task):
// local calls advance it as they end, so the turn knows how long the
// task has been held (held).
type taskClock struct {
	local, lengthSeen int
	taskStart         time.Time
}

// historyLength is the run's history length as the next workflow task
// will find it: the length at this task's start and a marker for each
// local activity started since. A task that runs quick local calls back
// to back — a model call, then a quick tool, step after step — records
// their markers only when it completes, so the length read at its start
// stays where it was and a turn of such steps would never hand on.
func (c *taskClock) historyLength(ctx workflow.Context) int {
	n := workflow.GetInfo(ctx).GetCurrentHistoryLength()
	if n != c.lengthSeen {
		// A new task: its length holds the markers counted until now.
		c.lengthSeen, c.local, c.taskStart = n, 0, workflow.Now(ctx)
	}
	return n + c.local
}

// held is how long the turn has held its workflow task: workflow
// time, which each local activity's end moves on by what it took, since
// the task started. Replay reads the same times from the history.
func (c *taskClock) held(ctx workflow.Context) time.Duration {
	c.historyLength(ctx)
	return workflow.Now(ctx).Sub(c.taskStart)
}

// handOn continues the turn as new: it takes what signals brought and no
// one took yet, lets the handlers in flight finish (Workflow Streams
// polls are released to poll the next run), and starts the next run with
// the request and the carry. A cancellation that came meanwhile ends the
// turn here instead.
func (t *turn) handOn(ctx workflow.Context) (agent.TurnResult, error) {
	t.log.DetachPollers()
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return agent.TurnResult{}, err
	}
	// What came until now, while the handlers finished too, is taken:
	// nothing is left in a channel of a run that has ended, and a
	// cancellation that came meanwhile is not carried past it.
	t.log.TakeBatches(ctx)
	t.drainProgress(ctx)
	t.drainChildren(ctx)
	t.receiveSteers(ctx)
	t.drainCancels(ctx)
	if t.canceled != nil {
		t.cont.continuing = false
		if p := t.cont.program; p != nil {
			// A program waiting to go on in the next run stops here: its
			// call and those it left undone are answered, as when a
			// cancellation reaches a program in a run.
			t.cont.program = nil
			t.resumeProgram(ctx, *p, t.agent.Limits.WithDefaults())
		}
		return t.finish(ctx, "", t.cancelError())
	}
	c, err := t.carry()
	if err != nil {
		return agent.TurnResult{}, err
	}
	workflow.GetLogger(ctx).Info("turn continues as new", "run", c.Run, "step", t.seq,
		"history_events", workflow.GetInfo(ctx).GetCurrentHistoryLength())
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("continuing as new after step %d", t.seq))
	t.forward.Flush(ctx)
	return agent.TurnResult{}, workflow.NewContinueAsNewError(ctx, contract.AgentTurn, t.req, c)
}

// carry is what the next run starts from: the core's state, then each
// component's.
func (t *turn) carry() (*contract.TurnCarry, error) {
	reasoning := t.parts.reasoning
	if len(reasoning) > 1 {
		// The result keeps the reasoning cut to its bound: so does the
		// carry, as one entry.
		reasoning = []string{words.Clip(strings.Join(reasoning, "\n\n"), agent.MaxResultReasoningBytes)}
	}
	c := &contract.TurnCarry{
		Run: t.cont.runs + 1, Start: t.start, Deadline: t.deadline,
		Agent: t.agent, Rule: t.rule, Iteration: t.iteration, Seq: t.seq, Usage: t.usage,
		Calls: t.recs.calls, CallsOmitted: t.recs.omitted, Round: len(t.recs.round), AfterTools: t.recs.afterTools, Unstored: t.unstored,
		Data: t.parts.data, CacheHit: t.parts.cacheHit, Reasoning: reasoning, Files: t.parts.files, Retrieved: t.parts.retrieved,
		Program: t.cont.program,
	}
	for _, p := range t.components() {
		if err := p.carry(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// resume takes the core's state back from what the previous run carried;
// the components took theirs as they started.
func (t *turn) resume(c contract.TurnCarry) {
	t.cont.runs, t.start, t.deadline = c.Run, c.Start, c.Deadline
	t.agent, t.rule, t.iteration, t.seq, t.usage = c.Agent, c.Rule, c.Iteration, c.Seq, c.Usage
	t.recs.calls, t.recs.omitted, t.recs.afterTools, t.unstored = c.Calls, c.CallsOmitted, c.AfterTools, c.Unstored
	if n := min(c.Round, len(c.Calls)); n > 0 {
		t.recs.round = t.recs.calls[len(t.recs.calls)-n:]
	}
	t.parts.data, t.parts.cacheHit, t.parts.reasoning, t.parts.files, t.parts.retrieved = c.Data, c.CacheHit, c.Reasoning, c.Files, c.Retrieved
	t.cont.program = c.Program
}
