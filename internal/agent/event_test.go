package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReplayText(t *testing.T) {
	tok := func(i int64, s string) Event { return Event{Index: i, Kind: EventToken, Text: s} }
	tests := []struct {
		name   string
		events []Event
		want   string
	}{
		{"plain", []Event{{Index: 1, Kind: EventStatus, Status: StreamRunning}, tok(2, "Hello, "), tok(3, "world")}, "Hello, world"},
		{"retry voids the failed attempt", []Event{
			tok(1, "Hel"), tok(2, "lo wo"),
			{Index: 3, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 1},
			tok(4, "Hello, world"),
		}, "Hello, world"},
		{"retry keeps earlier steps", []Event{
			tok(1, "Step one. "), {Index: 2, Kind: EventToolStart}, tok(3, "Ste"),
			{Index: 4, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 3},
			tok(5, "Step two."),
		}, "Step one. Step two."},
		{"no events", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ReplayText(tt.events))
		})
	}
}

func TestValidateAfter(t *testing.T) {
	require.NoError(t, ValidateAfter(0, 1))
	require.NoError(t, ValidateAfter(0, 10))
	require.NoError(t, ValidateAfter(9, 10))
	require.ErrorContains(t, ValidateAfter(10, 10), "beyond the end of the stream (last index 9)")
	require.ErrorContains(t, ValidateAfter(-1, 10), "must not be negative")
	require.True(t, IsCode(ValidateAfter(1, 1), CodeInvalid))
}

func TestStreamTenant(t *testing.T) {
	tenant, err := StreamTenant("turn/acme/job/with/slashes")
	require.NoError(t, err)
	require.Equal(t, "acme", tenant)
	for _, bad := range []string{"", "turn/", "turn/acme", "turn//job", "conv/acme/s1"} {
		_, err := StreamTenant(bad)
		require.True(t, IsCode(err, CodeInvalid), bad)
	}
}

// documentedEvents is one event of each kind with the JSON docs/events.md
// shows for it.
func documentedEvents() []struct {
	event Event
	json  string
} {
	deadline := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	usage := &Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}
	return []struct {
		event Event
		json  string
	}{
		{Event{StreamID: "turn/acme/j1", Index: 1, Kind: EventStatus, Status: StreamRunning},
			`{"stream_id":"turn/acme/j1","event_index":1,"kind":"status","status":"RUNNING"}`},
		{Event{StreamID: "turn/acme/j1", Index: 9, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 4, Attempt: 2, Step: 1},
			`{"stream_id":"turn/acme/j1","event_index":9,"kind":"status","status":"RETRYING","void_from":4,"attempt":2,"step":1}`},
		{Event{StreamID: "turn/acme/j1", Index: 4, Kind: EventToken, Text: "The result", Step: 1, Attempt: 1},
			`{"stream_id":"turn/acme/j1","event_index":4,"kind":"token","attempt":1,"step":1,"text":"The result"}`},
		{Event{StreamID: "turn/acme/j1", Index: 3, Kind: EventReasoning, Text: "The user wants 2+2.", Step: 1, Attempt: 1},
			`{"stream_id":"turn/acme/j1","event_index":3,"kind":"reasoning","attempt":1,"step":1,"text":"The user wants 2+2."}`},
		{Event{StreamID: "turn/acme/j1", Index: 5, Kind: EventToolArgsDelta, Step: 1, Attempt: 1,
			Tool: &ToolEvent{CallID: "call_1", Name: "calculator", ArgsDelta: `{"expres`}},
			`{"stream_id":"turn/acme/j1","event_index":5,"kind":"tool_args_delta","attempt":1,"step":1,"tool":{"call_id":"call_1","name":"calculator","args_delta":"{\"expres"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 7, Kind: EventToolStart,
			Tool: &ToolEvent{CallID: "call_1", Name: "calculator", Args: json.RawMessage(`{"expression":"2+2"}`), Source: "calculator"}},
			`{"stream_id":"turn/acme/j1","event_index":7,"kind":"tool_start","tool":{"call_id":"call_1","name":"calculator","args":{"expression":"2+2"},"source":"calculator"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 8, Kind: EventToolProgress,
			Tool: &ToolEvent{CallID: "call_1", Name: "calculator", Message: "parsing"}},
			`{"stream_id":"turn/acme/j1","event_index":8,"kind":"tool_progress","tool":{"call_id":"call_1","name":"calculator","message":"parsing"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 10, Kind: EventToolEnd,
			Tool: &ToolEvent{CallID: "call_1", Name: "calculator", Status: "ok", Output: "4"}},
			`{"stream_id":"turn/acme/j1","event_index":10,"kind":"tool_end","tool":{"call_id":"call_1","name":"calculator","status":"ok","output":"4"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 6, Kind: EventApprovalRequired,
			Tool: &ToolEvent{CallID: "call_1", Name: "restart", Args: json.RawMessage(`{"service":"api"}`), Reason: "always", Deadline: &deadline}},
			`{"stream_id":"turn/acme/j1","event_index":6,"kind":"approval_required","tool":{"call_id":"call_1","name":"restart","args":{"service":"api"},"reason":"always","deadline":"2026-11-24T10:00:00Z"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 7, Kind: EventApprovalDecided, Tool: &ToolEvent{CallID: "call_1", Name: "restart"},
			Approval: &ApprovalEvent{Outcome: ApprovalApproved, Approver: "alice", Reason: "planned", Via: ViaUpdate}},
			`{"stream_id":"turn/acme/j1","event_index":7,"kind":"approval_decided","tool":{"call_id":"call_1","name":"restart"},"approval":{"outcome":"approved","approver":"alice","reason":"planned","via":"update"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 6, Kind: EventQuestion,
			Tool:     &ToolEvent{CallID: "call_2", Name: "ask_user", Args: json.RawMessage(`{"question":"Which city?","choices":["Paris","Rome"]}`), Deadline: &deadline},
			Question: &QuestionEvent{Text: "Which city?", Choices: []string{"Paris", "Rome"}, Role: "user"}},
			`{"stream_id":"turn/acme/j1","event_index":6,"kind":"question","tool":{"call_id":"call_2","name":"ask_user","args":{"question":"Which city?","choices":["Paris","Rome"]},"deadline":"2026-11-24T10:00:00Z"},"question":{"text":"Which city?","choices":["Paris","Rome"],"role":"user"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 8, Kind: EventQuestionAnswered, Tool: &ToolEvent{CallID: "call_2", Name: "ask_user"},
			Question: &QuestionEvent{Outcome: QuestionAnswered, Answerer: "uma", Via: ViaUpdate}},
			`{"stream_id":"turn/acme/j1","event_index":8,"kind":"question_answered","tool":{"call_id":"call_2","name":"ask_user"},"question":{"outcome":"answered","answerer":"uma","via":"update"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 2, Kind: EventStepStart, Step: 1},
			`{"stream_id":"turn/acme/j1","event_index":2,"kind":"step_start","step":1}`},
		{Event{StreamID: "turn/acme/j1", Index: 11, Kind: EventStepFinish, Step: 1, Usage: usage, FinishReason: FinishToolCalls, Model: "openai:gpt-4o-mini"},
			`{"stream_id":"turn/acme/j1","event_index":11,"kind":"step_finish","step":1,"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150},"finish_reason":"tool_calls","model":"openai:gpt-4o-mini"}`},
		{Event{StreamID: "conv/acme/s1", Index: 1, Kind: EventMessageStart, Message: &MessageEvent{ID: "s1-1", StreamID: "turn/acme/s1-1"}},
			`{"stream_id":"conv/acme/s1","event_index":1,"kind":"message_start","message":{"id":"s1-1","stream_id":"turn/acme/s1-1"}}`},
		{Event{StreamID: "conv/acme/s1", Index: 2, Kind: EventMessageEnd, Message: &MessageEvent{ID: "s1-1", StreamID: "turn/acme/s1-1", Status: StatusCompleted}},
			`{"stream_id":"conv/acme/s1","event_index":2,"kind":"message_end","message":{"id":"s1-1","stream_id":"turn/acme/s1-1","status":"completed"}}`},
		{Event{StreamID: "turn/acme/s1-3", Index: 8, Kind: EventSteered, Message: &MessageEvent{ID: "s1-4"}, Text: "in euros, please"},
			`{"stream_id":"turn/acme/s1-3","event_index":8,"kind":"steered","message":{"id":"s1-4"},"text":"in euros, please"}`},
		{Event{StreamID: "turn/acme/j1", Index: 12, Kind: EventContent, Content: json.RawMessage(`{"type":"text","text":"2+2 = 4"}`)},
			`{"stream_id":"turn/acme/j1","event_index":12,"kind":"content","content":{"type":"text","text":"2+2 = 4"}}`},
		{Event{StreamID: "turn/acme/j1", Index: 11, Kind: EventUsage, Step: 1, Usage: usage, Model: "anthropic:claude-3-5-haiku-latest"},
			`{"stream_id":"turn/acme/j1","event_index":11,"kind":"usage","step":1,"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150},"model":"anthropic:claude-3-5-haiku-latest"}`},
		{Event{StreamID: "turn/acme/j1", Index: 9, Kind: EventCustom, Tool: &ToolEvent{CallID: "call_1", Name: "report"},
			Custom: &CustomEvent{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2,3]}`)}},
			`{"stream_id":"turn/acme/j1","event_index":9,"kind":"custom","tool":{"call_id":"call_1","name":"report"},"custom":{"name":"chart","id":"c1","value":{"points":[1,2,3]}}}`},
		{Event{StreamID: "turn/acme/j1", Index: 13, Kind: EventError, Error: &TurnError{Type: "ModelFailed", Message: "the model is unavailable", Retryable: true}},
			`{"stream_id":"turn/acme/j1","event_index":13,"kind":"error","error":{"type":"ModelFailed","message":"the model is unavailable","retryable":true}}`},
	}
}

func TestEventShapes(t *testing.T) {
	seen := map[EventKind]bool{}
	for _, d := range documentedEvents() {
		t.Run(string(d.event.Kind), func(t *testing.T) {
			seen[d.event.Kind] = true
			require.NoError(t, d.event.Validate())
			b, err := json.Marshal(d.event)
			require.NoError(t, err)
			require.JSONEq(t, d.json, string(b))
			back, err := DecodeEvent([]byte(d.json))
			require.NoError(t, err)
			require.Equal(t, d.event, back)
		})
	}
	for _, k := range EventKinds() {
		require.True(t, seen[k], "kind %s has no documented event", k)
		_, ok := eventShapes[k]
		require.True(t, ok, "kind %s has no shape", k)
	}
	require.Len(t, eventShapes, len(EventKinds()))
}

// TestChildVoidFrom: a child event's void_from is an index of the child's
// stream, which the parent's log (a delegating turn's, a Conversation's)
// numbers otherwise.
func TestChildVoidFrom(t *testing.T) {
	retrying := func(index, childIndex, voidFrom int64) Event {
		return Event{StreamID: "conv/acme/s1", Index: index, Kind: EventStatus, Status: StreamRetrying, VoidFrom: voidFrom, Attempt: 2, Step: 3,
			Child: &ChildEvent{CallID: "s1-1", StreamID: "turn/acme/s1-1", Index: childIndex}}
	}
	require.NoError(t, retrying(4, 40, 31).Validate(), "void_from after the parent's index, before the child's")
	require.ErrorContains(t, retrying(90, 40, 40).Validate(), "void_from 40 must be before the event's own index 40")
}

func TestEventValidateRefuses(t *testing.T) {
	tool := &ToolEvent{CallID: "c1", Name: "calc"}
	usage := &Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}
	tests := []struct {
		name  string
		event Event
		want  string
	}{
		{"unknown kind", Event{Kind: "tokens"}, `event kind "tokens" is unknown (known: status, token, reasoning`},
		{"no kind", Event{Text: "x"}, `event kind "" is unknown`},
		{"field of another kind", Event{Kind: EventToken, Text: "x", Tool: tool}, "token event: tool does not belong to it"},
		{"model on a token", Event{Kind: EventToken, Text: "x", Model: "openai:m"}, "token event: model does not belong to it"},
		{"reasoning without text", Event{Kind: EventReasoning, Step: 1}, "reasoning event: text is required"},
		{"status unknown", Event{Kind: EventStatus, Status: "DONE"}, `status event: status "DONE" is unknown`},
		{"void_from on another status", Event{Kind: EventStatus, Status: StreamRunning, VoidFrom: 2}, "void_from belongs to a RETRYING status only"},
		{"void_from after itself", Event{Index: 3, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 3}, "void_from 3 must be before the event's own index 3"},
		{"negative index", Event{Index: -1, Kind: EventToken}, "event_index -1 is negative"},
		{"negative step", Event{Kind: EventToken, Step: -2}, "must not be negative"},
		{"tool without call id", Event{Kind: EventToolStart, Tool: &ToolEvent{Name: "calc"}}, "tool.call_id and tool.name are required"},
		{"args delta outside its kind", Event{Kind: EventToolStart, Tool: &ToolEvent{CallID: "c1", Name: "calc", ArgsDelta: "{"}}, "tool.args_delta belongs to tool_args_delta events only"},
		{"args delta in args", Event{Kind: EventToolArgsDelta, Tool: &ToolEvent{CallID: "c1", Name: "calc", Args: json.RawMessage(`{}`)}}, "goes in tool.args_delta, not tool.args"},
		{"decided without approval", Event{Kind: EventApprovalDecided, Tool: tool}, "approval_decided event: approval is required"},
		{"decided, unknown outcome", Event{Kind: EventApprovalDecided, Tool: tool, Approval: &ApprovalEvent{Outcome: "ok", Via: ViaUpdate}}, `approval.outcome "ok"`},
		{"decided, unknown via", Event{Kind: EventApprovalDecided, Tool: tool, Approval: &ApprovalEvent{Outcome: ApprovalRejected, Via: "email"}}, `approval.via "email"`},
		{"step_start without step", Event{Kind: EventStepStart}, "step_start event: step is required"},
		{"step_finish without usage", Event{Kind: EventStepFinish, Step: 1, FinishReason: FinishStop}, "step_finish event: usage is required"},
		{"step_finish without reason", Event{Kind: EventStepFinish, Step: 1, Usage: usage}, "finish_reason is required"},
		{"step_finish, odd reason", Event{Kind: EventStepFinish, Step: 1, Usage: usage, FinishReason: "tool calls"}, "may not contain spaces"},
		{"negative usage", Event{Kind: EventUsage, Usage: &Usage{PromptTokens: -1}}, "usage counts must not be negative"},
		{"message without id", Event{Kind: EventMessageStart, Message: &MessageEvent{}}, "message.id is required"},
		{"message_start with a status", Event{Kind: EventMessageStart, Message: &MessageEvent{ID: "m1", Status: StatusCompleted}}, "message.status belongs to message_end"},
		{"message_end without status", Event{Kind: EventMessageEnd, Message: &MessageEvent{ID: "m1"}}, `message.status "": want completed`},
		{"custom without name", Event{Kind: EventCustom, Custom: &CustomEvent{Value: json.RawMessage(`1`)}}, "custom.name is required"},
		{"custom, bad name", Event{Kind: EventCustom, Custom: &CustomEvent{Name: "1chart", Value: json.RawMessage(`1`)}}, `custom.name "1chart": want a letter`},
		{"custom without value", Event{Kind: EventCustom, Custom: &CustomEvent{Name: "chart"}}, "value is required"},
		{"custom, value not JSON", Event{Kind: EventCustom, Custom: &CustomEvent{Name: "chart", Value: json.RawMessage(`{`)}}, "value is not valid JSON"},
		{"custom, value too large", Event{Kind: EventCustom, Custom: &CustomEvent{Name: "chart",
			Value: json.RawMessage(`"` + strings.Repeat("x", MaxCustomValueBytes) + `"`)}}, "the limit is 16384"},
		{"custom from a tool without call id", Event{Kind: EventCustom, Custom: &CustomEvent{Name: "chart", Value: json.RawMessage(`1`)},
			Tool: &ToolEvent{Name: "report"}}, "tool.call_id and tool.name are required"},
		{"content not JSON", Event{Kind: EventContent, Content: json.RawMessage(`{"type":`)}, "content is not valid JSON"},
		{"child without stream", Event{Kind: EventToken, Child: &ChildEvent{CallID: "c1", Index: 1}}, "child needs call_id, stream_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.event.Validate()
			requireInvalid(t, err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestDecodeEventRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		`[1]`:                       "an event must be a JSON object, not an array",
		`{"kind":"token","text":5}`: "field text must be a string, not a number",
		`{"kind":"token"`:           "not valid JSON",
		`{"kind":"reasoning"}`:      "reasoning event: text is required",
		`{"kind":"tool_args_delta","tool":{"call_id":"c1"}}`: "tool.call_id and tool.name are required",
	} {
		_, err := DecodeEvent([]byte(raw))
		requireInvalid(t, err)
		require.ErrorContains(t, err, want, raw)
	}
}

func TestReplayKeepsReasoningApart(t *testing.T) {
	events := []Event{
		{Index: 1, Kind: EventStatus, Status: StreamRunning},
		{Index: 2, Kind: EventStepStart, Step: 1},
		{Index: 3, Kind: EventReasoning, Text: "Let me th", Step: 1, Attempt: 1},
		{Index: 4, Kind: EventToken, Text: "Hel", Step: 1, Attempt: 1},
		{Index: 5, Kind: EventToolArgsDelta, Step: 1, Attempt: 1, Tool: &ToolEvent{CallID: "c1", Name: "calc", ArgsDelta: `{"a`}},
		{Index: 6, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 3, Attempt: 2, Step: 1},
		{Index: 7, Kind: EventReasoning, Text: "Let me think.", Step: 1, Attempt: 2},
		{Index: 8, Kind: EventToken, Text: "Hello", Step: 1, Attempt: 2},
		{Index: 9, Kind: EventReasoning, Text: "child thoughts", Child: &ChildEvent{CallID: "d1", StreamID: "turn/acme/c", Index: 3}},
		{Index: 10, Kind: EventToolArgsDelta, Step: 1, Attempt: 2, Tool: &ToolEvent{CallID: "c1", Name: "calc", ArgsDelta: `{"a":1}`}},
	}
	require.Equal(t, "Hello", ReplayText(events))
	require.Equal(t, "Let me think.", ReplayReasoning(events))

	var kept []int64
	for _, e := range Unvoided(events) {
		kept = append(kept, e.Index)
	}
	require.Equal(t, []int64{1, 2, 6, 7, 8, 9, 10}, kept, "the first attempt's reasoning, text and argument deltas are void")

	b := TokenBatch{Events: events[6:8]}
	require.Equal(t, "Hello", b.Text(), "a batch's text leaves reasoning out")
}

func TestEventKindStreamed(t *testing.T) {
	var streamed []EventKind
	for _, k := range EventKinds() {
		if k.Streamed() {
			streamed = append(streamed, k)
		}
	}
	require.Equal(t, []EventKind{EventToken, EventReasoning, EventToolArgsDelta}, streamed)
}

func TestEventString(t *testing.T) {
	for _, d := range documentedEvents() {
		s := d.event.String()
		require.Contains(t, s, string(d.event.Kind), "%s", s)
	}
	require.Equal(t, `#5 tool_args_delta call_1 "{\"expres"`, documentedEvents()[4].event.String())
	require.Equal(t, "#2 message_end s1-1 completed", documentedEvents()[15].event.String())
}
