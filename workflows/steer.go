package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
)

// A message added to a running turn (a Conversation's on_busy "steer",
// contract.SignalSteer) is taken in at the turn's next step boundary:
// before its next model call, each message becomes a user step of its
// own, stored by that call before it reads the turn so far, and a
// steered event in the log. A message that arrives while the model
// writes interrupts the call (interruptOnSteer): what it had written
// stays in the log and becomes the model's answer cut short, the step
// before the message's, and the model is called again at once. A model
// that has answered when a message arrives answers again, having read
// it. The turn's result names the
// messages it took in (agent.TurnResult.Steered), so that its
// Conversation answers any it did not as messages of their own.

// steering is the turn's steer signal and the messages it brought.
type steering struct {
	// steer receives messages added to the turn (contract.SignalSteer);
	// inbox holds those received and not yet taken in; steers are those
	// taken in that the next model call stores; steered their ids and
	// prompted their prompts, in order.
	steer    workflow.ReceiveChannel
	inbox    []agent.SteerMessage
	steers   []contract.SteerStep
	steered  []string
	prompted []string
	// cut is the answer a message interrupted (interruptOnSteer), for the
	// next model call to store; cutAt, beside steered, the step of the
	// answer each message cut short (0: none).
	cut   *contract.CutStep
	cutAt []int
}

// start registers the steer signal (messages are received at step
// boundaries only) and takes back the messages the previous run had.
func (s *steering) start(ctx workflow.Context, _ *turn, carried *contract.TurnCarry) error {
	s.steer = workflow.GetSignalChannelWithOptions(ctx, contract.SignalSteer, workflow.SignalChannelOptions{
		Description: `add a message to the running turn: {"id","prompt"}; the model reads it before its next call`,
	})
	if carried != nil {
		s.inbox, s.steered, s.prompted, s.cutAt = carried.Inbox, carried.Steered, carried.Prompted, carried.CutAt
	}
	return nil
}

// carry hands on the messages received and not yet taken in (the run
// continues as new at a boundary, before takeSteers), and those taken in.
func (s *steering) carry(c *contract.TurnCarry) error {
	c.Inbox, c.Steered, c.Prompted, c.CutAt = s.inbox, s.steered, s.prompted, s.cutAt
	return nil
}

// receiveSteers moves the messages that have arrived to the inbox and
// reports whether it holds any. One that does not validate is dropped,
// and logged.
func (t *turn) receiveSteers(ctx workflow.Context) bool {
	signals.Drain(t.steer, func(m agent.SteerMessage) {
		if err := m.Validate(); err != nil {
			workflow.GetLogger(ctx).Warn("signal ignored", "signal", contract.SignalSteer, "error", err.Error())
			return
		}
		t.inbox = append(t.inbox, m)
	})
	return len(t.inbox) > 0
}

// takeSteers takes in the messages that have arrived: each gets the
// turn's next step, for the next model call to store (CallModelInput.Steer),
// and a steered event.
func (t *turn) takeSteers(ctx workflow.Context) {
	if !t.receiveSteers(ctx) {
		return
	}
	for i, m := range t.inbox {
		t.seq++
		t.steers = append(t.steers, contract.SteerStep{Seq: t.seq, Prompt: m.Prompt})
		t.steered, t.prompted = append(t.steered, m.ID), append(t.prompted, m.Prompt)
		cutAt := 0
		if i == 0 && t.cut != nil {
			cutAt = t.cut.Seq
		}
		t.cutAt = append(t.cutAt, cutAt)
		t.emit(ctx, agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: m.ID}, Text: m.Prompt})
	}
	t.inbox = nil
}
