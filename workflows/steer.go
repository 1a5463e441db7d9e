package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// A message added to a running turn (a Conversation's on_busy "steer",
// contract.SignalSteer) is taken in at the turn's next step boundary:
// before its next model call, each message becomes a user step of its
// own, stored by that call before it reads the turn so far, and a
// steered event in the log. A model that has answered when a message
// arrives answers again, having read it. The turn's result names the
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
}

// start registers the steer signal (messages are received at step
// boundaries only) and takes back the messages the previous run had.
func (s *steering) start(ctx workflow.Context, _ *turn, carried *contract.TurnCarry) error {
	s.steer = workflow.GetSignalChannelWithOptions(ctx, contract.SignalSteer, workflow.SignalChannelOptions{
		Description: `add a message to the running turn: {"id","prompt"}; the model reads it before its next call`,
	})
	if carried != nil {
		s.inbox, s.steered, s.prompted = carried.Inbox, carried.Steered, carried.Prompted
	}
	return nil
}

// carry hands on the messages received and not yet taken in (the run
// continues as new at a boundary, before takeSteers), and those taken in.
func (s *steering) carry(c *contract.TurnCarry) error {
	c.Inbox, c.Steered, c.Prompted = s.inbox, s.steered, s.prompted
	return nil
}

// receiveSteers moves the messages that have arrived to the inbox and
// reports whether it holds any. One that does not validate is dropped,
// and logged.
func (t *turn) receiveSteers(ctx workflow.Context) bool {
	for {
		var m agent.SteerMessage
		if !t.steer.ReceiveAsync(&m) {
			return len(t.inbox) > 0
		}
		if err := m.Validate(); err != nil {
			workflow.GetLogger(ctx).Warn("steer signal ignored", "error", err.Error())
			continue
		}
		t.inbox = append(t.inbox, m)
	}
}

// takeSteers takes in the messages that have arrived: each gets the
// turn's next step, for the next model call to store (CallModelInput.Steer),
// and a steered event.
func (t *turn) takeSteers(ctx workflow.Context) {
	if !t.receiveSteers(ctx) {
		return
	}
	for _, m := range t.inbox {
		t.seq++
		t.steers = append(t.steers, contract.SteerStep{Seq: t.seq, Prompt: m.Prompt})
		t.steered, t.prompted = append(t.steered, m.ID), append(t.prompted, m.Prompt)
		t.emit(ctx, agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: m.ID}, Text: m.Prompt})
	}
	t.inbox = nil
}
