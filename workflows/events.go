package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/signals"
)

// The turn's event log is internal/eventlog's Log: the turn appends its
// own events and takes its model calls' token batches into it (fenced
// there), and its child turns' events; what follows is when it does so.

// logging is the turn's event log and what feeds it besides the turn:
// the progress of its running tool calls; and the forwarder of its own
// events to its parent turn, when it is a child.
type logging struct {
	t        *turn // the core: its id, deadline, child turns and steered messages
	log      *eventlog.Log
	progress workflow.ReceiveChannel
	forward  *eventlog.Forwarder
	// observe says the worker has Event hooks, which read the log once
	// it has ended (observeEvents).
	observe bool
}

// start makes the run's log — a new one, or the previous run's as it
// handed it on (its tail; indices and offsets go on) — and registers the
// events query and signal, the Workflow Streams handlers, the status
// query and the tool progress signal.
func (l *logging) start(ctx workflow.Context, t *turn, carried *contract.TurnCarry) error {
	l.t = t
	l.log = eventlog.New(t.workflowID)
	if carried != nil {
		var err error
		if l.log, err = eventlog.Restore(t.workflowID, carried.Stream); err != nil {
			return fmt.Errorf("restore the event log: %w", err)
		}
		l.log.Earlier(workflow.GetInfo(ctx).ContinuedExecutionRunID)
		l.observe = carried.ObserveEvents
	}
	// A child turn's own tool and approval events go to its parent's log.
	parent := ""
	if forwardsEvents(ctx, t.req) {
		parent = t.req.Notify
	}
	l.forward = eventlog.NewForwarder(parent, t.workflowID)
	if err := l.log.Register(ctx, t.req.TenantID); err != nil {
		return err
	}
	if err := l.log.ServeStream(ctx, func(workflow.Context) bool { return true }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryStatus, func() (agent.TurnStatus, error) {
		return t.status(), nil
	}, workflow.QueryHandlerOptions{Description: "where the turn is: status, agent, step, tool calls, tokens, approvals waiting"}); err != nil {
		return err
	}
	l.progress = workflow.GetSignalChannelWithOptions(ctx, contract.SignalToolProgress, workflow.SignalChannelOptions{
		Description: "what a running tool call is doing (sent by ExecuteTool)",
	})
	return nil
}

// observeEvents hands the ended log to the worker's Event hooks
// (contract.ObserveEvents): a regular activity, so that the workflow
// task that logged the terminal event has completed and the events query
// answers while it runs. The hooks only read: a failure is logged, and
// the turn ends as it would have.
func (l *logging) observeEvents(ctx workflow.Context, tenantID, agentID, jobID string) {
	if !l.observe {
		return
	}
	// A cancelled turn still ends here: the read must not be cancelled
	// with it.
	octx, _ := workflow.NewDisconnectedContext(ctx)
	octx = workflow.WithActivityOptions(octx, observeOptions())
	err := workflow.ExecuteActivity(octx, contract.ObserveEvents, contract.ObserveEventsInput{
		TenantID: tenantID, AgentID: agentID, JobID: jobID, WorkflowID: l.t.workflowID,
	}).Get(octx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("event hooks did not read the turn's log", "error", contract.ErrorOf(err).Message)
	}
}

// carry hands on the log's tail (eventlog.CarryBytes of it) and its next
// index: readers further behind read the earlier runs.
func (l *logging) carry(c *contract.TurnCarry) error {
	s, err := l.log.Carry(eventlog.CarryBytes)
	if err != nil {
		return fmt.Errorf("hand on the event log: %w", err)
	}
	c.Stream, c.ObserveEvents = s, l.observe
	return nil
}

// status is the turn at a glance, for the status query.
func (t *turn) status() agent.TurnStatus {
	return agent.TurnStatus{
		TenantID: t.req.TenantID, JobID: t.req.JobID, AgentID: t.agent.ID, AgentVersion: t.agent.Version,
		Step: t.seq, ToolCalls: t.recs.omitted + len(t.recs.calls), TokensUsed: t.usage.TotalTokens,
		PendingApprovals: len(t.appr.pending), CancelRequested: t.canceled != nil, LastEventIndex: t.log.Next() - 1,
		Status: t.log.Status(),
	}
}

// emit appends a workflow event after the batches and progress already
// received, so that the log keeps the order in which things happened.
func (l *logging) emit(ctx workflow.Context, e agent.Event) {
	l.takeArrived(ctx)
	l.forward.Forward(ctx, l.log.Append(e))
}

// takeArrived logs what has arrived and is not logged yet: token
// batches, tool progress, child turns' events.
func (l *logging) takeArrived(ctx workflow.Context) {
	l.log.TakeBatches(ctx)
	l.drainProgress(ctx)
	l.t.drainChildren(ctx)
}

// awaitTool waits for a tool call, logging the progress of running calls
// and the events of child turns as they arrive.
func (l *logging) awaitTool(ctx workflow.Context, f workflow.Future) {
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(workflow.Future) { done = true })
	signals.On(sel, l.progress, func(p agent.ToolProgress) { l.addProgress(ctx, p) })
	signals.On(sel, l.t.children, func(b agent.TokenBatch) { l.t.acceptChild(ctx, b) })
	for !done {
		sel.Select(ctx)
	}
}

// drainProgress logs the progress already received.
func (l *logging) drainProgress(ctx workflow.Context) {
	signals.Drain(l.progress, func(p agent.ToolProgress) { l.addProgress(ctx, p) })
}

// addProgress logs what a running call reported: its progress message as
// tool_progress, then the custom events it emitted, in order. A custom
// event not of its shape is dropped.
func (l *logging) addProgress(ctx workflow.Context, p agent.ToolProgress) {
	if p.Message != "" || len(p.Custom) == 0 {
		l.log.Append(agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: p.CallID, Name: p.Tool, Message: p.Message}})
	}
	if len(p.Custom) == 0 {
		return
	}
	for _, c := range p.Custom {
		e := agent.Event{Kind: agent.EventCustom, Custom: &c, Tool: &agent.ToolEvent{CallID: p.CallID, Name: p.Tool}}
		if err := e.Validate(); err != nil {
			workflow.GetLogger(ctx).Warn("custom event dropped", "call_id", p.CallID, "error", err.Error())
			continue
		}
		l.forward.Forward(ctx, l.log.Append(e))
	}
}

// awaitModel waits for a CallModel, taking its token batches into the log
// as they arrive, then those that came with its completion. When steerable
// (the turn has an iteration left to answer a message in), a message
// steered in meanwhile interrupts the call (interruptOnSteer).
func (l *logging) awaitModel(ctx workflow.Context, f workflow.Future, reply *contract.CallModelResult, steerable bool) error {
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(workflow.Future) { done = true })
	l.log.ReceiveBatches(ctx, sel)
	if steerable {
		l.t.interruptOnSteer(ctx, sel)
	}
	for !done {
		sel.Select(ctx)
	}
	l.log.TakeBatches(ctx)
	if err := f.Get(ctx, reply); err != nil {
		return err
	}
	l.log.AcceptTail(ctx, reply.Tail, reply.TailLive)
	return nil
}

// forwardsEvents reports whether a turn sends its notify workflow its own
// tool and approval events as well as its token batches: a delegated turn
// does (to its parent turn), and a Conversation's turn that asks
// (ForwardEvents, with Notify its parent).
func forwardsEvents(ctx workflow.Context, req agent.TurnRequest) bool {
	if req.Parent != nil {
		return true
	}
	return req.ForwardEvents && req.Notify != "" && req.Notify == parentWorkflowID(ctx)
}
