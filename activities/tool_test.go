package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func TestExecuteToolRunsToolOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	call := agent.ToolCall{ID: "call-1", Name: "tally", Arguments: `{}`}
	tests := []struct {
		name     string
		stored   *agent.Message // step 2 before the first ExecuteTool; nil: none
		want     contract.ExecuteToolResult
		wantRuns int32
	}{
		{
			name:     "result of the first run",
			want:     contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolOK, Preview: "run 1"},
			wantRuns: 1,
		},
		{
			name:   "result stored by an attempt that did not report",
			stored: &agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "tally", Content: "run 41"},
			want:   contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolOK, Preview: "run 41"},
		},
		{
			name:   "error result stored",
			stored: &agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "tally", Content: errorPrefix + "no such thing"},
			want:   contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolError, Preview: errorPrefix + "no such thing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "count")
			require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1,
				agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			if tt.stored != nil {
				require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 2, *tt.stored))
			}
			in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
			h.toolRuns.Store(0)

			// The second call is a retry of an attempt whose completion was
			// lost: it must not run the tool again.
			for range 2 {
				var res contract.ExecuteToolResult
				h.execute(t, contract.ExecuteTool, in, &res)
				require.Equal(t, tt.want, res)
			}
			require.Equal(t, tt.wantRuns, h.toolRuns.Load())
		})
	}
}
