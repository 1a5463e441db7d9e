package activities

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestExecuteToolStoresDelegatedResult: a delegate_to_agent call the turn
// ran as a child turn is stored as the call's result — what the model
// reads of the child's answer, its refs and its data — and a retry gets
// the same; without the child's result, the call is refused, not run.
func TestExecuteToolStoresDelegatedResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	rows := []byte(`[{"id":2,"price":100},{"id":3,"price":200}]`)
	dataRef, err := h.store.PutTenantBlob(ctx, "demo", rows, "application/json")
	require.NoError(t, err)
	preview, err := agent.PreviewOf(rows, dataRef, agent.SampleRows)
	require.NoError(t, err)
	previewJSON, err := json.Marshal(preview)
	require.NoError(t, err)

	call := agent.ToolCall{ID: "call-1", Name: "delegate", Arguments: `{"agent_id":"researcher","prompt":"find the cheapest"}`}
	tests := []struct {
		name       string
		delegated  *agent.TurnResult
		wantStatus string
		wantText   []string // in order
		wantData   bool
	}{
		{
			name: "an answer",
			delegated: &agent.TurnResult{Status: agent.StatusCompleted, Output: "The cheapest costs 100.", ResultRef: "artifact://r1",
				Metadata: agent.ResultMetadata{AgentID: "researcher"}},
			wantStatus: agent.ToolOK,
			wantText:   []string{"agent \"researcher\" answered:\nThe cheapest costs 100.", "result_ref: artifact://r1 (the whole answer; pass it as input_ref"},
		},
		{
			name: "an answer resting on data",
			delegated: &agent.TurnResult{Status: agent.StatusCompleted, Output: "Two rows.", ResultRef: "artifact://r2",
				DataRef: dataRef, ResultPreview: previewJSON, Metadata: agent.ResultMetadata{AgentID: "researcher"}},
			wantStatus: agent.ToolOK,
			wantText:   []string{"agent \"researcher\" answered:\nTwo rows.", "result_ref: artifact://r2", "data: " + dataRef + " (dataset, 2 rows; fields: id number, price number)", "the first 2 rows"},
			wantData:   true,
		},
		{
			name: "over its budget",
			delegated: &agent.TurnResult{Status: agent.StatusFailed, ResultRef: "artifact://r3",
				Error:    &agent.TurnError{Type: agent.ErrTypeTokenBudget, Message: "turn used 120 tokens; its budget is 100"},
				Metadata: agent.ResultMetadata{AgentID: "researcher", TokensUsed: 120}},
			wantStatus: agent.ToolError,
			wantText:   []string{errorPrefix + `agent "researcher" did not finish (failed): ` + agent.ErrTypeTokenBudget + ": turn used 120 tokens", "(its result: artifact://r3)"},
		},
		{
			name:       "no such agent",
			delegated:  &agent.TurnResult{Status: agent.StatusRejected, Error: &agent.TurnError{Type: agent.ErrTypeAgentNotFound, Message: `agent "researcher" not found`}},
			wantStatus: agent.ToolError,
			wantText:   []string{errorPrefix + `agent "researcher" did not finish (rejected): ` + agent.ErrTypeAgentNotFound},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "delegate")
			require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call, Delegated: tt.delegated}
			var res, again contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, in, &res)
			h.execute(t, contract.ExecuteTool, in, &again)
			require.Equal(t, res, again, "a retry returns the stored result")
			require.Equal(t, tt.wantStatus, res.Status)

			step, err := h.store.Step(ctx, "demo", job, 2)
			require.NoError(t, err)
			require.Equal(t, agent.RoleTool, step.Role)
			require.Equal(t, "call-1", step.ToolCallID)
			rest := step.Content
			require.True(t, strings.HasPrefix(rest, tt.wantText[0]), rest)
			for _, part := range tt.wantText {
				i := strings.Index(rest, part)
				require.GreaterOrEqual(t, i, 0, "%q not in %q", part, step.Content)
				rest = rest[i+len(part):]
			}
			if tt.wantData {
				require.NotNil(t, res.Data)
				require.Equal(t, dataRef, res.Data.Ref)
				require.Equal(t, 2, res.Data.RowCount)
			} else {
				require.Nil(t, res.Data)
			}
		})
	}

	t.Run("not run as a tool", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "delegate")
		require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
		var res contract.ExecuteToolResult
		h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}, &res)
		require.Equal(t, agent.ToolError, res.Status)
		require.Contains(t, res.Preview, "delegate_to_agent calls run as child turns")
	})
}
