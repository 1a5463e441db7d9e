package agentflow_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestFuncDelivery: with the store as the ledger, a Go function's call is
// made once whichever attempt makes it — a retry after an attempt that
// may have called it is told the outcome is unknown — unless the function
// is idempotent, when every attempt calls it.
func TestFuncDelivery(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	var charges atomic.Int32
	charge := func(context.Context, struct {
		Cents int `json:"cents"`
	}) (string, error) {
		charges.Add(1)
		return "charged", nil
	}
	for _, tc := range []struct {
		name  string
		opts  []agentflow.FuncOption
		calls int32
	}{
		{name: "at most once", calls: 1},
		{name: "idempotent", opts: []agentflow.FuncOption{agentflow.Idempotent()}, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charges.Store(0)
			jobID := "charge-" + tc.name[:2]
			require.NoError(t, s.BeginTurn(ctx, store.Turn{TenantID: "demo", JobID: jobID, WorkflowID: "turn/demo/" + jobID, AgentID: "a", AgentVersion: 1,
				Request: agent.TurnRequest{Version: agent.ProtocolVersion, JobID: jobID, TenantID: "demo", Prompt: "charge"}}))
			kind := agentflow.Func("charge", "Charge a card.", charge, tc.opts...)
			require.Equal(t, agent.ApprovalAlways, kind.Approval, "neither option lifts approval")
			tool, err := kind.Build(agentflow.ToolSpec{}, agentflow.ToolDeps{})
			require.NoError(t, err)
			k := effects.Key{TenantID: "demo", JobID: jobID, Seq: 1}
			call := agentflow.Call{Args: json.RawMessage(`{"cents":500}`)}
			_, err = tool.Run(effects.With(ctx, effects.NewGate(s, k)), call)
			require.NoError(t, err)
			_, err = tool.Run(effects.With(ctx, effects.NewGate(s, k)), call)
			if tc.calls == 1 {
				var maybe *effects.MaybeSentError
				require.ErrorAs(t, err, &maybe, "the retry does not call it again")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.calls, charges.Load())
		})
	}
}
