package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestRendererShowsTheVocabulary: the model's reasoning on lines of its
// own, apart from the answer (faint on a terminal); argument fragments
// not at all (tool_start shows the arguments); step ends, approval
// decisions and custom data in a line each.
func TestRendererShowsTheVocabulary(t *testing.T) {
	call := &agent.ToolEvent{CallID: "call_1", Name: "calculator"}
	delta := func(s string) agent.Event {
		return agent.Event{Kind: agent.EventToolArgsDelta, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: s}}
	}
	events := []agent.Event{
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventStepStart, Step: 1},
		{Kind: agent.EventReasoning, Text: "The user wants "},
		{Kind: agent.EventReasoning, Text: "2+2.\nEasy."},
		{Kind: agent.EventToken, Text: "Let me "},
		{Kind: agent.EventToken, Text: "add."},
		delta(""), delta(`{"expression":`), delta(`"2+2"}`),
		{Kind: agent.EventUsage, Step: 1, Usage: &agent.Usage{TotalTokens: 30}},
		{Kind: agent.EventApprovalRequired, Tool: call},
		{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval},
		{Kind: agent.EventApprovalDecided, Tool: call, Approval: &agent.ApprovalEvent{Outcome: agent.ApprovalApproved, Approver: "alice", Reason: "planned", Via: agent.ViaUpdate}},
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Args: json.RawMessage(`{"expression":"2+2"}`)}},
		{Kind: agent.EventCustom, Tool: call, Custom: &agent.CustomEvent{Name: "chart", Value: json.RawMessage(`{"points":[1,2]}`)}},
		{Kind: agent.EventToolEnd, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Status: agent.ToolOK, Output: "4"}},
		{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishToolCalls, Usage: &agent.Usage{TotalTokens: 30}},
		{Kind: agent.EventStepStart, Step: 3},
		{Kind: agent.EventToken, Text: "2+2 = 4"},
		{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishStop, Usage: &agent.Usage{TotalTokens: 12}},
		{Kind: agent.EventStatus, Status: agent.StreamCompleted},
	}
	tests := []struct {
		name string
		dim  bool
		want string
	}{
		{"plain", false, "" +
			"  thinking: The user wants 2+2.\n" +
			"  thinking: Easy.\n" +
			"Let me add.\n" +
			"  waiting for approval of calculator (call call_1)\n" +
			"  [waiting for approval]\n" +
			"  calculator (call call_1) approved by alice: planned\n" +
			"  tool calculator {\"expression\":\"2+2\"}\n" +
			"  tool calculator data chart {\"points\":[1,2]}\n" +
			"  tool calculator → ok 4\n" +
			"  [model call 1: tool_calls, 30 tokens]\n" +
			"2+2 = 4\n" +
			"  [model call 2: stop, 12 tokens]\n"},
		{"on a terminal", true, "" +
			"\x1b[2m  thinking: The user wants 2+2.\n" +
			"  thinking: Easy.\x1b[0m\n" +
			"Let me add.\n" +
			"  waiting for approval of calculator (call call_1)\n" +
			"  [waiting for approval]\n" +
			"  calculator (call call_1) approved by alice: planned\n" +
			"  tool calculator {\"expression\":\"2+2\"}\n" +
			"  tool calculator data chart {\"points\":[1,2]}\n" +
			"  tool calculator → ok 4\n" +
			"  [model call 1: tool_calls, 30 tokens]\n" +
			"2+2 = 4\n" +
			"  [model call 2: stop, 12 tokens]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &renderer{out: &out, dim: tt.dim}
			for _, e := range events {
				r.event(e)
			}
			require.Equal(t, tt.want, out.String())
		})
	}
}

// TestRendererDecisions: each way a waiting call can be decided reads as
// what happened to it.
func TestRendererDecisions(t *testing.T) {
	call := &agent.ToolEvent{CallID: "c1", Name: "restart"}
	for _, tt := range []struct {
		a    agent.ApprovalEvent
		want string
	}{
		{agent.ApprovalEvent{Outcome: agent.ApprovalApproved, Approver: "ana", Via: agent.ViaSignal}, "  restart (call c1) approved by ana\n"},
		{agent.ApprovalEvent{Outcome: agent.ApprovalRejected, Approver: "bo", Reason: "not during the sale", Via: agent.ViaUpdate},
			"  restart (call c1) rejected by bo: not during the sale\n"},
		{agent.ApprovalEvent{Outcome: agent.ApprovalTimedOut, Via: agent.ViaTimeout}, "  restart (call c1) not decided in time: not run\n"},
		{agent.ApprovalEvent{Outcome: agent.ApprovalCanceled, Via: agent.ViaCancel}, "  restart (call c1) not run: the turn was cancelled\n"},
	} {
		var out bytes.Buffer
		(&renderer{out: &out}).event(agent.Event{Kind: agent.EventApprovalDecided, Tool: call, Approval: &tt.a})
		require.Equal(t, tt.want, out.String())
	}
	var out bytes.Buffer
	r := &renderer{out: &out}
	r.event(agent.Event{Kind: agent.EventToken, Text: "child says", Child: &agent.ChildEvent{CallID: "d1", StreamID: "turn/demo/c", Index: 3}})
	r.event(agent.Event{Kind: agent.EventApprovalDecided, Tool: call, Approval: &agent.ApprovalEvent{Outcome: agent.ApprovalApproved, Approver: "ana", Via: agent.ViaUpdate},
		Child: &agent.ChildEvent{CallID: "d1", StreamID: "turn/demo/c", Index: 4}})
	require.Equal(t, "    │ child says\n    │ restart (call c1) approved by ana\n", out.String())
}
