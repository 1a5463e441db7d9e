package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// turnContext decides which of the turn's own steps each model call reads
// whole, and which as a digest (agent.ContextPolicy,
// contract.CallModelInput.WholeFrom and DigestFrom). A model step starts
// at its first message — a message added to the turn, the problems of an
// answer to repair, or the model's reply — and the component keeps where
// the latest steps started: the recent ones, those the digest lists, and
// no more, so that it stays small however long the turn.
type turnContext struct {
	t *turn // the core: its agent's context policy
	// starts are the seqs at which the latest steps started, oldest
	// first; steps counts every step the turn started.
	starts []int
	steps  int
}

func (c *turnContext) start(_ workflow.Context, t *turn, carried *contract.TurnCarry) error {
	c.t = t
	if carried != nil {
		c.starts, c.steps = carried.ContextCarry.ContextStarts, carried.ContextCarry.ContextSteps
	}
	return nil
}

func (c *turnContext) carry(tc *contract.TurnCarry) error {
	tc.ContextCarry = contract.ContextCarry{ContextStarts: c.starts, ContextSteps: c.steps}
	return nil
}

// beforeCall tells the step's model call what it reads whole and as a
// digest, then records that the step started at first.
func (c *turnContext) beforeCall(in *contract.CallModelInput, first int) {
	in.WholeFrom, in.DigestFrom = c.window(c.t.agent.Context)
	c.started(first, c.t.agent.Context)
}

// window is what the next model call reads whole (from the step at
// seq whole) and as a digest (from seq digest): steps move out of the
// whole a block of KeepRecentSteps at a time, so that between blocks each
// call's request continues the last one's (the provider's prompt cache);
// at least KeepRecentSteps steps stay whole, and the digest lists the
// 2×KeepRecentSteps before them. Zeros: every step whole.
func (c *turnContext) window(p agent.ContextPolicy) (whole, digest int) {
	p = p.WithDefaults()
	k := p.KeepRecentSteps
	if p.Compaction == agent.CompactionNone || c.steps < 2*k {
		return 0, 0
	}
	compacted := (c.steps - k) / k * k
	first := c.steps - len(c.starts) // the step starts[0] started
	whole = c.starts[compacted-first]
	digest = c.starts[max(compacted-2*k, first)-first]
	return whole, digest
}

// started records that a step started at seq, forgetting what no window
// reads any more.
func (c *turnContext) started(seq int, p agent.ContextPolicy) {
	c.starts = append(c.starts, seq)
	c.steps++
	if keep := 4 * p.WithDefaults().KeepRecentSteps; len(c.starts) > keep {
		c.starts = append([]int(nil), c.starts[len(c.starts)-keep:]...)
	}
}
