package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestReplayEditedResults: a retry's replay answers a call with the
// result a person edited for the recorded call it matches (by that
// call's id, whatever id the replay's own call has), in place of the
// recorded one, an error included; an edit naming no matched call
// changes nothing, and no tool runs.
func TestReplayEditedResults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	recorded := randomJob()
	h.loadAgent(t, recorded, "data")
	a := agent.ToolCall{ID: "rec-a", Name: "echo_data", Arguments: `{"text":"ran live a"}`}
	b := agent.ToolCall{ID: "rec-b", Name: "echo_data", Arguments: `{"text":"ran live b"}`}
	for i, m := range []agent.Message{
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{a, b}},
		{Role: agent.RoleTool, ToolCallID: a.ID, Name: a.Name, Content: "recorded a"},
		{Role: agent.RoleTool, ToolCallID: b.ID, Name: b.Name, Content: errorPrefix + "recorded failure"},
	} {
		require.NoError(t, h.store.PutStep(ctx, "demo", recorded, i+1, m))
	}

	tests := []struct {
		name        string
		results     []agent.ReplayResult
		call        agent.ToolCall
		wantStatus  string
		wantPreview string
	}{
		{name: "recorded result", call: a, wantStatus: agent.ToolOK, wantPreview: "recorded a"},
		{name: "recorded error", call: b, wantStatus: agent.ToolError, wantPreview: errorPrefix + "recorded failure"},
		{name: "edited result", results: []agent.ReplayResult{{CallID: "rec-a", Result: "edited a"}},
			call: a, wantStatus: agent.ToolOK, wantPreview: "edited a"},
		{name: "edited error becomes a result", results: []agent.ReplayResult{{CallID: "rec-b", Result: "edited b"}},
			call: b, wantStatus: agent.ToolOK, wantPreview: "edited b"},
		{name: "edit of another call", results: []agent.ReplayResult{{CallID: "rec-b", Result: "edited b"}},
			call: a, wantStatus: agent.ToolOK, wantPreview: "recorded a"},
		{name: "edit of a call not recorded", results: []agent.ReplayResult{{CallID: "new-1", Result: "edited"}},
			call: agent.ToolCall{ID: "x", Name: "echo_data", Arguments: `{"text":"other"}`}, wantStatus: agent.ToolError, wantPreview: agent.NoRecordedResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			in := loadAgentInput(job, "data")
			in.Request.Channel = agent.ChannelRetry
			in.Request.Replay = &agent.Replay{JobID: recorded, Seq: 1, Results: tt.results}
			var loaded contract.LoadAgentResult
			h.execute(t, contract.LoadAgent, in, &loaded)
			ag := loaded.Agent
			// The replay's own call has its own id: edits name the recorded one.
			call := tt.call
			call.ID = "new-1"
			require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			h.toolRuns.Store(0)
			var res contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version,
				Seq: 2, Call: call, Replay: true}, &res)
			require.Equal(t, tt.wantStatus, res.Status)
			require.Contains(t, res.Preview, tt.wantPreview)
			require.NotContains(t, res.Preview, "ran live")
			require.Zero(t, h.toolRuns.Load())
		})
	}
}
