package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/signals"
)

// A Conversation's event log (internal/eventlog's Log, conversation.go
// there): for each message, a message_start when its turn starts, the
// turn's events as it runs, its answer's text and a message_end with its
// status. The turn's events come as a delegated turn's come to its
// parent: the Conversation is the turn's notify workflow (its model
// calls' token batches) and the turn forwards it its own tool and
// approval events (ForwardEvents); they are logged as child events whose
// call_id is the message's id and whose stream_id is the turn's. The log
// answers Workflow Streams' poll update and offset query; before the
// Conversation continues as new it drains the polls and hands its last
// items on (eventlog.Log.Carry), so that offsets and indices go on in the
// next run and a subscriber follows the conversation from run to run.
// Runs from before conversationStreamsChange keep no log and refuse polls.

// startStream decides whether this run keeps the event log, and takes up
// the log the previous run handed on.
func (c *conversation) startStream(ctx workflow.Context, carry *agent.ConversationCarry) error {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	c.streams = workflow.GetVersion(ctx, conversationStreamsChange, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	c.log = eventlog.New(id)
	c.carry.Stream = nil
	if !c.streams || carry == nil || carry.Stream == nil {
		return nil
	}
	l, err := eventlog.Restore(id, *carry.Stream)
	if err != nil {
		return contract.Failure(fmt.Errorf("carry: %w", err))
	}
	c.log = l
	return nil
}

// serveStream registers the Workflow Streams handlers (polls are refused
// in runs that keep no log) and the signal that brings the turns' events.
func (c *conversation) serveStream(ctx workflow.Context) error {
	c.turns = workflow.GetSignalChannelWithOptions(ctx, contract.SignalNotifyTokens, workflow.SignalChannelOptions{
		Description: "token batches and tool events of the turn answering the current message",
	})
	return c.log.ServeStream(ctx, func(workflow.Context) bool { return c.streams })
}

// followTurn makes the Conversation the turn's notify workflow, to which
// it forwards its events.
func (c *conversation) followTurn(ctx workflow.Context, req *agent.TurnRequest) {
	if !c.streams {
		return
	}
	req.Notify = workflow.GetInfo(ctx).WorkflowExecution.ID
	req.ForwardEvents = true
}

// startMessage logs the message_start of the message whose turn just
// started and returns what logs its end: its answer's text and its
// message_end.
func (c *conversation) startMessage(ctx workflow.Context, msg agent.PendingMessage, turnID string) (end func(status, output, stoppedBy string)) {
	if !c.streams {
		return func(string, string, string) {}
	}
	c.log.StartMessage(msg.JobID, turnID, msg.Busy)
	from := workflow.GetInfo(ctx).GetCurrentHistoryLength()
	return func(status, output, stoppedBy string) {
		c.log.EndMessage(status, output, stoppedBy)
		c.span = max(c.span, workflow.GetInfo(ctx).GetCurrentHistoryLength()-from)
	}
}

// awaitTurn waits for the message's turn to end, logging its events as
// they arrive, and those that came before its end.
func (c *conversation) awaitTurn(ctx workflow.Context, child workflow.Future) {
	if !c.streams {
		return
	}
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(child, func(workflow.Future) { done = true })
	signals.On(sel, c.turns, func(b agent.TokenBatch) { c.accept(ctx, b) })
	for !done {
		sel.Select(ctx)
	}
	// A turn's signals all reach the Conversation before its end does.
	c.takeBatches(ctx)
}

// takeBatches logs the batches already received: the running turn's, or
// (between messages) none.
func (c *conversation) takeBatches(ctx workflow.Context) {
	signals.Drain(c.turns, func(b agent.TokenBatch) { c.accept(ctx, b) })
}

func (c *conversation) accept(ctx workflow.Context, b agent.TokenBatch) {
	if !c.log.AcceptMessage(b) {
		workflow.GetLogger(ctx).Debug("batch refused: not of the running message's turn, or not after what it sent", "stream_id", b.StreamID, "first", b.First)
	}
}

// detachPollers releases the polls waiting before the run continues as
// new, and refuses new ones until it has: subscribers poll the next run.
func (c *conversation) detachPollers() {
	if c.streams {
		c.log.DetachPollers()
	}
}

// handOn is what the run hands on of its log: its last items.
func (c *conversation) handOn(ctx workflow.Context) (*agent.StreamState, error) {
	if !c.streams {
		return nil, nil
	}
	c.takeBatches(ctx)
	s, err := c.log.Carry(eventlog.CarryBytes)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// headroom is the history a run keeps free for the next message. A
// turn's events come to the Conversation's history too, and so do the
// polls of its subscribers: the room is for a turn half as large again
// as the largest of the run so far (its span counts the updates that
// came while it ran), and never less than rollHeadroom.
func (c *conversation) headroom() int {
	return max(rollHeadroom, c.span*3/2)
}
