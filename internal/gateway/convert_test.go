package gateway

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestEventRoundTrip: every kind of event reaches gRPC clients in its own
// field of the StreamEvent oneof and comes back (FromPBEvent, as the
// starter reads it) as the same event.
func TestEventRoundTrip(t *testing.T) {
	deadline := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	child := &agent.ChildEvent{CallID: "d1", StreamID: "turn/acme/j1-d1", Index: 4}
	tests := []struct {
		event agent.Event
		field string // the oneof field it travels in
	}{
		{agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 4, Attempt: 2, Step: 3}, "status"},
		{agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed,
			Error: &agent.TurnError{Type: "ModelFailed", Message: "down", Retryable: true}}, "status"},
		{agent.Event{Kind: agent.EventToken, Text: "Hello", Step: 3, Attempt: 1}, "token"},
		{agent.Event{Kind: agent.EventToken, Text: "child text", Step: 1, Attempt: 1, Child: child}, "token"},
		{agent.Event{Kind: agent.EventReasoning, Text: "Think first.", Step: 3, Attempt: 2}, "reasoning"},
		{agent.Event{Kind: agent.EventToolArgsDelta, Step: 3, Attempt: 1,
			Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: `{"expr`}}, "tool_args_delta"},
		{agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator",
			Args: json.RawMessage(`{"expression":"2+2"}`), Source: "calc", FromToolkit: "math"}}, "tool_start"},
		{agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Message: "parsing"}}, "tool_progress"},
		{agent.Event{Kind: agent.EventToolEnd, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator", Status: "ok", Output: "4",
			Data: &agent.DataPreview{Type: agent.DataDataset, Ref: "cas://sha256:00", RowCount: 2}}}, "tool_end"},
		{agent.Event{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{CallID: "call_2", Name: "restart",
			Args: json.RawMessage(`{"service":"api"}`), Reason: "always", Deadline: &deadline}}, "approval_required"},
		{agent.Event{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{CallID: "call_2", Name: "restart",
			Args: json.RawMessage(`{"service":"api"}`), Reason: "send it again?", Deadline: &deadline, ApprovalID: "apr_1", Resend: true}}, "approval_required"},
		{agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "call_2", Name: "restart"},
			Approval: &agent.ApprovalEvent{Outcome: agent.ApprovalRejected, Approver: "alice", Reason: "not now", Via: agent.ViaUpdate}}, "approval_decided"},
		{agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "call_3", Name: "restart"},
			Approval: &agent.ApprovalEvent{Outcome: agent.ApprovalTimedOut, Via: agent.ViaTimeout}}, "approval_decided"},
		{agent.Event{Kind: agent.EventStepStart, Step: 3}, "step_start"},
		{agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishToolCalls,
			Usage: &agent.Usage{PromptTokens: 100, CompletionTokens: 40, TotalTokens: 140, CachedTokens: 64, ReasoningTokens: 12},
			Model: "openai:gpt-4o"}, "step_finish"},
		{agent.Event{Kind: agent.EventMessageStart, Message: &agent.MessageEvent{ID: "s1-2", StreamID: "turn/acme/s1-2"}}, "message_start"},
		{agent.Event{Kind: agent.EventMessageEnd, Message: &agent.MessageEvent{ID: "s1-2", StreamID: "turn/acme/s1-2", Status: agent.StatusFailed}}, "message_end"},
		{agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: "s1-3"}, Text: "in euros"}, "steered"},
		{agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"text","text":"4"}`)}, "content"},
		// UsageEvent carries the three counts it always had.
		{agent.Event{Kind: agent.EventUsage, Step: 3, Usage: &agent.Usage{PromptTokens: 100, CompletionTokens: 40, TotalTokens: 140},
			Model: "anthropic:claude-3-5-haiku-latest"}, "usage"},
		{agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2]}`)},
			Tool: &agent.ToolEvent{CallID: "call_1", Name: "report"}}, "custom"},
		{agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "note", Value: json.RawMessage(`null`)}}, "custom"},
		{agent.Event{Kind: agent.EventError, Error: &agent.TurnError{Type: "ModelFailed", Message: "down"}}, "error"},
		{agent.Event{Kind: agent.EventQuestion, Tool: &agent.ToolEvent{CallID: "call_2", Name: "ask_user", Deadline: &deadline},
			Question: &agent.QuestionEvent{Text: "Which city?", Choices: []string{"Paris", "Rome"}, AllowOther: true, Role: "user"}}, "question"},
		{agent.Event{Kind: agent.EventQuestionAnswered, Tool: &agent.ToolEvent{CallID: "call_2", Name: "ask_user"},
			Question: &agent.QuestionEvent{Outcome: agent.QuestionAnswered, Answerer: "uma", Via: agent.ViaSignal}}, "question_answered"},
		{agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingInput}, "status"},
	}
	covered := map[agent.EventKind]bool{}
	for i, tt := range tests {
		e := tt.event
		e.StreamID, e.Index = "turn/acme/j1", int64(10+i)
		t.Run(fmt.Sprintf("%d_%s", i, e.Kind), func(t *testing.T) {
			require.NoError(t, e.Validate(), "the sample must be a valid event")
			out := toPBEvent(e)
			m := out.ProtoReflect()
			set := m.WhichOneof(m.Descriptor().Oneofs().ByName("event"))
			require.NotNil(t, set, "no oneof field is set")
			require.Equal(t, tt.field, string(set.Name()))
			require.Equal(t, e, FromPBEvent(out))
		})
		covered[e.Kind] = true
	}
	for _, k := range agent.EventKinds() {
		require.True(t, covered[k], "kind %s is not mapped to gRPC", k)
	}
}

// TestEventOneofFieldsAreKinds: the oneof's fields are exactly the kinds,
// by name, so that a client can name an event's kind from either side.
func TestEventOneofFieldsAreKinds(t *testing.T) {
	fields := (&pb.StreamEvent{}).ProtoReflect().Descriptor().Oneofs().ByName("event").Fields()
	var names []string
	for i := 0; i < fields.Len(); i++ {
		names = append(names, string(fields.Get(i).Name()))
	}
	var kinds []string
	for _, k := range agent.EventKinds() {
		kinds = append(kinds, string(k))
	}
	require.ElementsMatch(t, kinds, names)
}
