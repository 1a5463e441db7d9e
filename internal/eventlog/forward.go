package eventlog

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Forwarder sends a child turn's own events to its parent turn's log
// (contract.SignalNotifyTokens), where they become child events: the
// kinds the parent's clients need to follow the child's work and to find
// its approvals (Forwarded). The child's tokens go there from CallModel
// (Sinks.Notify); its end is the call's, which the parent logs itself.
// Workflow side: it runs inside the child's workflow.
type Forwarder struct {
	parent   string // the parent's workflow id; "": nothing is forwarded
	streamID string // the child's own stream
	// outbox holds the events not yet delivered; sender is set once the
	// coroutine that sends them runs, sending while it waits for a
	// signal.
	outbox          []agent.Event
	sender, sending bool
}

// NewForwarder returns the forwarder of the turn streamID to its parent
// turn; with parent "" it forwards nothing.
func NewForwarder(parent, streamID string) *Forwarder {
	return &Forwarder{parent: parent, streamID: streamID}
}

// Forwarded reports the kinds of its own events a child turn sends to its
// parent: its tool calls, its approvals and questions and what came of
// them, what
// its tools emit for clients, and the messages added to it while it ran.
// (Its steps and statuses are its own.)
func Forwarded(k agent.EventKind) bool {
	switch k {
	case agent.EventToolStart, agent.EventToolEnd, agent.EventApprovalRequired, agent.EventApprovalDecided, agent.EventCustom, agent.EventSteered,
		agent.EventQuestion, agent.EventQuestionAnswered:
		return true
	}
	return false
}

// Forward queues an event for the parent. The events go in order, in one
// signal at a time: Temporal delivers separate signals in any order (a
// tool_end could overtake its tool_start). They go even when the turn is
// being cancelled; the turn waits for them (Flush) before a model call
// (whose tokens the parent receives by notify, from the activity) and
// before it ends, so that the parent has them in the child's order and
// all of them before it learns that the child ended.
func (f *Forwarder) Forward(ctx workflow.Context, e agent.Event) {
	if f.parent == "" || !Forwarded(e.Kind) {
		return
	}
	f.outbox = append(f.outbox, e)
	if f.sender {
		return
	}
	f.sender = true
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(sctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return len(f.outbox) > 0 }); err != nil {
				return
			}
			events := f.outbox
			f.sending = true
			err := workflow.SignalExternalWorkflow(ctx, f.parent, "", contract.SignalNotifyTokens,
				agent.TokenBatch{StreamID: f.streamID, First: events[0].Index, Events: events}).Get(ctx, nil)
			if err != nil {
				// A parent that is gone does not hold the child up.
				workflow.GetLogger(ctx).Debug("events not delivered to the parent turn", "parent", f.parent, "error", err.Error())
			}
			f.outbox = f.outbox[len(events):]
			f.sending = false
		}
	})
}

// Flush waits until the events queued for the parent are sent.
func (f *Forwarder) Flush(ctx workflow.Context) {
	if !f.sender {
		return
	}
	sctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(sctx, func() bool { return len(f.outbox) == 0 && !f.sending })
}
