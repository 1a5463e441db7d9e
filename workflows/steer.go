package workflows

import (
	"time"

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
	t *turn // the core: its id, steps, log and cancellation
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
func (s *steering) start(ctx workflow.Context, t *turn, carried *contract.TurnCarry) error {
	s.t = t
	s.steer = workflow.GetSignalChannelWithOptions(ctx, contract.SignalSteer, workflow.SignalChannelOptions{
		Description: `add a message to the running turn: {"id","prompt"}; the model reads it before its next call`,
	})
	if carried != nil {
		m := carried.SteerCarry
		s.inbox, s.steered, s.prompted, s.cutAt = m.Inbox, m.Steered, m.Prompted, m.CutAt
	}
	return nil
}

// carry hands on the messages received and not yet taken in (the run
// continues as new at a boundary, before takeSteers), and those taken in.
func (s *steering) carry(c *contract.TurnCarry) error {
	c.SteerCarry = contract.SteerCarry{Inbox: s.inbox, Steered: s.steered, Prompted: s.prompted, CutAt: s.cutAt}
	return nil
}

// receiveSteers moves the messages that have arrived to the inbox and
// reports whether it holds any. One that does not validate is dropped,
// and logged.
func (s *steering) receiveSteers(ctx workflow.Context) bool {
	signals.Drain(s.steer, func(m agent.SteerMessage) {
		if err := m.Validate(); err != nil {
			workflow.GetLogger(ctx).Warn("signal ignored", "signal", contract.SignalSteer, "error", err.Error())
			return
		}
		s.inbox = append(s.inbox, m)
	})
	return len(s.inbox) > 0
}

// beforeStep takes in, before each model call, the messages that have
// arrived.
func (s *steering) beforeStep(ctx workflow.Context) { s.takeSteers(ctx) }

// beforeCall has the step's model call store, once, the answer cut
// short and the messages taken in: it stores them before it reads the
// turn.
func (s *steering) beforeCall(in *contract.CallModelInput, _ int) {
	in.Steer, s.steers = s.steers, nil
	in.Cut, s.cut = s.cut, nil
}

// answerAgain receives the messages that came while the model answered:
// it answers again, having read them.
func (s *steering) answerAgain(ctx workflow.Context) bool { return s.receiveSteers(ctx) }

// beforeSave names in the result the messages the turn took in, for its
// Conversation to answer those it did not, and has SaveResult store the
// steps of the answers they cut short.
func (s *steering) beforeSave(in *contract.SaveResultInput) {
	in.Result.Steered, in.Steered, in.CutAt = s.steered, s.prompted, s.cutAt
}

// takeSteers takes in the messages that have arrived: each gets the
// turn's next step, for the next model call to store (CallModelInput.Steer),
// and a steered event.
func (s *steering) takeSteers(ctx workflow.Context) {
	if !s.receiveSteers(ctx) {
		return
	}
	for i, m := range s.inbox {
		s.t.seq++
		s.steers = append(s.steers, contract.SteerStep{Seq: s.t.seq, Prompt: m.Prompt})
		s.steered, s.prompted = append(s.steered, m.ID), append(s.prompted, m.Prompt)
		cutAt := 0
		if i == 0 && s.cut != nil {
			cutAt = s.cut.Seq
		}
		s.cutAt = append(s.cutAt, cutAt)
		s.t.emit(ctx, agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: m.ID}, Text: m.Prompt})
	}
	s.inbox = nil
}

// interruptOnSteer has sel, while a model call runs, take the messages
// steered into the turn into its inbox and, at the first, interrupt the
// call on the live path (contract.InterruptModel): the call fails at once
// as interrupted, and the turn goes on with the messages (callModel)
// instead of after the whole answer. A lost interruption costs only that:
// the call ends as it would have, and the messages are taken after it.
func (s *steering) interruptOnSteer(ctx workflow.Context, sel workflow.Selector) {
	sent := false
	sel.AddReceive(s.steer, func(workflow.ReceiveChannel, bool) {
		if !s.receiveSteers(ctx) || sent {
			return
		}
		sent = true
		opts := localOptions()
		opts.StartToCloseTimeout = 5 * time.Second
		opts.Summary = "interrupt the model call for a message steered in"
		f := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), contract.InterruptModel,
			contract.InterruptModelInput{StreamID: s.t.workflowID})
		sel.AddFuture(f, func(f workflow.Future) {
			if err := f.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("interrupting the model call failed", "error", contract.ErrorOf(err).Message)
			}
		})
	})
}

// cutShort reports whether the call failed with err because it was
// interrupted for the messages steered in, not for a cancellation: what
// the call had written stays in the log and is the model's answer cut
// short, which the next call stores before the messages.
func (s *steering) cutShort(ctx workflow.Context, err error, in contract.CallModelInput) bool {
	if !contract.IsInterrupted(err) || s.t.canceled != nil || ctx.Err() != nil {
		return false
	}
	s.t.seal(ctx, in)
	s.cut = &contract.CutStep{Seq: in.Seq, Text: s.t.log.TextFrom(in.FirstIndex)}
	return true
}
