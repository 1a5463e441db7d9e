package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools"
)

// TestToolLogLinesSayWhoseCall: the worker's log lines about a tool call
// — the activity's own ("tool call failed") and the tool's, written
// through telemetry.Logger with the call's context — carry the tenant,
// job, agent id and version, tool and call id, once each.
func TestToolLogLinesSayWhoseCall(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	// The catalog's tally tool, here of a kind that logs and then fails
	// the way a runtime does (not the model's mistake: retried).
	failing := tools.Kind{
		Name: "tally", Description: "Fails.", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`),
		Build: func(_ agent.Tool, d tools.Deps) (tools.Tool, error) { return failingTool{d.Logger}, nil },
	}
	h := newHarness(t, modelScript, func(d *Deps) {
		kinds, err := tools.NewRegistry(tools.Deps{Logger: logger}, append(tools.Builtin(), failing, echoDataKind(), ownPreviewKind())...)
		require.NoError(t, err)
		d.Tools, d.Logger = kinds, logger
	})
	job := randomJob()
	ag := h.loadAgent(t, job, "count")
	call := agent.ToolCall{ID: "call-7", Name: "tally", Arguments: `{}`}
	require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
	in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
	_, err := h.env.ExecuteActivity(contract.ExecuteTool, in)
	require.Error(t, err, "the attempt fails, to be retried")

	want := map[string]any{"tenant": "demo", "job_id": job, "agent_id": "assistant", "agent_version": int64(ag.Version), "tool": "tally", "call_id": "call-7"}
	for _, msg := range []string{"tally is out of order", "tool call failed"} {
		lines := logs.FilterMessage(msg).All()
		require.Len(t, lines, 1, msg)
		fields := lines[0].ContextMap()
		for k, v := range want {
			require.Equal(t, v, fields[k], "%s: %s", msg, k)
		}
		seen := map[string]int{}
		for _, f := range lines[0].Context {
			seen[f.Key]++
			require.Equal(t, 1, seen[f.Key], "%s: %s twice", msg, f.Key)
		}
	}
}

type failingTool struct{ log *zap.Logger }

func (f failingTool) Run(ctx context.Context, _ tools.Call) (tools.Output, error) {
	telemetry.Logger(ctx, f.log).Info("tally is out of order")
	return tools.Output{}, errors.New("counter jammed")
}
