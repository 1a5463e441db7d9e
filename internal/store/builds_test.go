package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
)

// TestBuildSignals: each build's results are its own; failed turns,
// guardrail trips and tokens are counted, evaluation turns and turns
// before the window are not.
func TestBuildSignals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := devtest.Database(t)
	stores := map[string]*store.Store{}
	for _, build := range []string{"agentflow:a", "agentflow:b"} {
		s, err := store.Open(ctx, url, store.Options{Build: build})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		stores[build] = s
	}
	failed := func(job, errType string) agent.TurnResult {
		r := completed(job, "")
		r.Status, r.Error = agent.StatusFailed, &agent.TurnError{Type: errType, Message: "no"}
		return r
	}
	save := func(build string, r agent.TurnResult, channel string) {
		t.Helper()
		req := agent.TurnRequest{TenantID: "demo", JobID: r.JobID, AgentID: "assistant", Prompt: "hi", Channel: channel}
		_, err := stores[build].SaveResult(ctx, "demo", "turn/demo/"+r.JobID, r, req)
		require.NoError(t, err)
	}
	since := time.Now().Add(-time.Minute)
	save("agentflow:a", completed("a1", "ok"), agent.ChannelHTTP)
	save("agentflow:a", completed("a2", "ok"), agent.ChannelGRPC)
	save("agentflow:b", completed("b1", "ok"), agent.ChannelHTTP)
	save("agentflow:b", failed("b2", agent.ErrTypeGuardrailTripped), agent.ChannelHTTP)
	save("agentflow:b", failed("b3", "ModelFailed"), agent.ChannelHTTP)
	save("agentflow:b", failed("b4", "ModelFailed"), agent.ChannelEval)

	a, err := stores["agentflow:a"].BuildSignals(ctx, "agentflow:a", since)
	require.NoError(t, err)
	require.Equal(t, store.BuildSignals{Build: "agentflow:a", Turns: 2, Tokens: 2 * 1523}, a)
	b, err := stores["agentflow:a"].BuildSignals(ctx, "agentflow:b", since)
	require.NoError(t, err)
	require.Equal(t, store.BuildSignals{Build: "agentflow:b", Turns: 3, Failed: 2, GuardTrips: 1, Tokens: 3 * 1523}, b, "the evaluation's turn is not traffic")
	require.InDelta(t, 2.0/3, b.ErrorRate(), 1e-9)

	later, err := stores["agentflow:a"].BuildSignals(ctx, "agentflow:b", time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, later.Turns, "the window starts when the rollout's step did")
	_, err = stores["agentflow:a"].BuildSignals(ctx, "", since)
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
}
