package activities

import (
	"context"
	"math"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// sealAttempt is the attempt that seals a call: newer than any of its own.
const sealAttempt = math.MaxInt32

// SealStream claims the stream of a model call that failed for good, or
// was stopped, so that none of its attempts publishes again, and returns
// what they stored for followers from in.From on, for the turn's log (nil:
// nothing; a signalled call stores nothing, its batches reach the turn as
// signals). A worker whose live path stores nothing has nothing to seal.
func (a *Activities) SealStream(ctx context.Context, in contract.SealStreamInput) (*agent.TokenBatch, error) {
	ap, ok := a.events.(eventlog.Appender)
	if !ok {
		return nil, nil
	}
	evs, err := ap.Claim(ctx, in.StreamID, in.Step, sealAttempt, in.From)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, nil
	}
	return &agent.TokenBatch{StreamID: in.StreamID, Step: in.Step, Attempt: sealAttempt, First: in.From, Events: evs}, nil
}
