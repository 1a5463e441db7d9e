package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// CallModel's streaming is tested where it lives (internal/eventlog);
// these check what a whole CallModel sent its turn.

type sentBatch struct{ agent.TokenBatch }

func texts(bs []sentBatch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Text())
	}
	return out
}

// requireGapFree checks that the batches continue each other from index
// first, each stamped with the call's stream, step and attempt.
func requireGapFree(t *testing.T, bs []sentBatch, first int64, in contract.CallModelInput, attempt int) {
	t.Helper()
	next := first
	for i, b := range bs {
		require.Equal(t, next, b.First, "batch %d", i)
		require.NotEmpty(t, b.Events, "batch %d", i)
		require.Equal(t, in.StreamID, b.StreamID)
		require.Equal(t, in.Seq, b.Step)
		require.Equal(t, attempt, b.Attempt)
		for j, e := range b.Events {
			require.Equal(t, b.First+int64(j), e.Index, "batch %d event %d", i, j)
			require.Equal(t, in.StreamID, e.StreamID)
			require.Equal(t, in.Seq, e.Step)
			require.Equal(t, attempt, e.Attempt)
		}
		next += int64(len(b.Events))
	}
}

// requireHeartbeats checks that the heartbeats report the last index the
// turn took: before, the index before the call's first, or a batch's last
// index, in order, and never one of a batch that was not taken.
func requireHeartbeats(t *testing.T, beats []int64, bs []sentBatch, before int64) {
	t.Helper()
	taken := map[int64]bool{before: true}
	for _, b := range bs {
		taken[b.First+int64(len(b.Events))-1] = true
	}
	require.IsNonDecreasing(t, beats)
	for _, v := range beats {
		require.True(t, taken[v], "heartbeat %d is not the last index of a batch the turn took (heartbeats %v)", v, beats)
	}
}
