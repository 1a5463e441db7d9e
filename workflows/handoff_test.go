package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestHandedOffCallMustWait: a local call handed off before the provider
// governor was asked (its first stages outlasted the hand-off) still runs
// as a local call, so the governor refuses to have it wait
// (contract.MustWait) and AwaitModel passes that on. The turn sends the
// call again as an activity, numbered after the handed-off attempt, as
// it does for a local call that was not handed off; it does not fail.
func TestHandedOffCallMustWait(t *testing.T) {
	f := &fakeTurn{agent: testAgent(), replies: []contract.CallModelResult{{HandedOff: true, Attempt: 1}, textReply("done")}}
	env := newEnv(t, f)
	var awaited []contract.CallModelInput
	env.OnActivity(contract.AwaitModel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.CallModelInput) (contract.CallModelResult, error) {
			awaited = append(awaited, in)
			return contract.CallModelResult{}, contract.MustWait("openai: 8 requests a second, the window is full", 1)
		})
	res, failure := runTurn(t, env, request())
	require.Nil(t, failure)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Len(t, awaited, 1)
	require.Len(t, f.modelCalls, 2)
	require.Equal(t, 1, f.modelCalls[1].AttemptBase, "the queued call's attempts follow the handed-off one")
	require.Zero(t, f.modelCalls[1].HandOffAfterMs, "the queued call is an activity, never handed off")
}
