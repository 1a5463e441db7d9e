package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestContentJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []agent.Message
		want string
	}{
		{"text", []agent.Message{{Role: agent.RoleSystem, Content: "Be brief."}, {Role: agent.RoleUser, Content: "What is 6 * 7?"}},
			`[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"What is 6 * 7?"}]}]`},
		{"tool call and result", []agent.Message{
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`}}},
			{Role: agent.RoleTool, ToolCallID: "c1", Name: "calculator", Content: "42"},
		}, `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"calculator","arguments":{"expression":"6 * 7"}}]},` +
			`{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"42"}]}]`},
		{"arguments that are not JSON are left out", []agent.Message{
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":`}}},
		}, `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"calculator"}]}]`},
		{"empty", []agent.Message{{Role: agent.RoleAssistant}}, `[{"role":"assistant","parts":[]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ContentJSON(tc.msgs)
			require.JSONEq(t, tc.want, got)
		})
	}
	long := ContentJSON([]agent.Message{{Role: agent.RoleUser, Content: strings.Repeat("x", 2*MaxTraceContent)}})
	require.LessOrEqual(t, len(long), MaxTraceContent+len("…"), "cut to the bound")
	require.False(t, json.Valid([]byte(long)), "a cut document is not whole JSON")
}

func TestErrorType(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{agent.Errorf(agent.CodeModelRejected, "model call failed: unsupported parameter"), "model_rejected"},
		{fmt.Errorf("store reply: %w", agent.Errorf(agent.CodeUnavailable, "db down")), "unavailable"},
		{fmt.Errorf("call: %w", context.Canceled), "canceled"},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("something else"), "_OTHER"},
	} {
		require.Equal(t, tc.want, ErrorType(tc.err), "%v", tc.err)
	}
}
