package agui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// aguiLines is events as one compact JSON line each, to compare.
func aguiLines(t *testing.T, events []aguiEvent) []string {
	t.Helper()
	out := []string{}
	for _, e := range events {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}

func aguiMapAll(events []agent.Event) []aguiEvent {
	return aguiMapWith(newAGUIMapper("th", "j1", "j1", false), events)
}

// aguiMapWith maps events with m.
func aguiMapWith(m *aguiMapper, events []agent.Event) []aguiEvent {
	var out []aguiEvent
	for _, e := range events {
		out = append(out, m.add(e)...)
	}
	return out
}

// TestAGUIMapper: the AG-UI events a turn's log maps to (docs/events.md,
// "Mapping to other protocols").
func TestAGUIMapper(t *testing.T) {
	step := func(kind agent.EventKind, n int, finish string) agent.Event {
		return agent.Event{Kind: kind, Step: n, FinishReason: finish}
	}
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	approval := gatewaytest.Call(agent.EventApprovalRequired, "", "")
	approval.Tool.Reason, approval.Tool.Deadline, approval.Tool.ApprovalID = "costly", &deadline, "apr_0123"
	for _, tc := range []struct {
		name   string
		events []agent.Event
		want   []string
	}{{
		name: "a streamed one-tool turn with reasoning",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), step(agent.EventStepStart, 1, ""), gatewaytest.Reasoning(1, "The user wants 2+2."), gatewaytest.Token(1, 1, "Let me add."),
			gatewaytest.Args(1, ""), gatewaytest.Args(1, `{"expression": `), gatewaytest.Args(1, `"2+2"}`), gatewaytest.Usage(1, 10, 5),
			gatewaytest.Call(agent.EventToolStart, "", ""), gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"), step(agent.EventStepFinish, 1, agent.FinishToolCalls),
			step(agent.EventStepStart, 3, ""), gatewaytest.Token(3, 1, "2+2 "), gatewaytest.Token(3, 1, "= 4"), gatewaytest.Usage(3, 20, 4), step(agent.EventStepFinish, 3, agent.FinishStop),
			gatewaytest.Content("2+2 = 4"), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"STEP_STARTED","stepName":"step 1"}`,
			`{"type":"REASONING_START","messageId":"j1-reasoning-3"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"j1-reasoning-3","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"j1-reasoning-3","delta":"The user wants 2+2."}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"j1-reasoning-3"}`,
			`{"type":"REASONING_END","messageId":"j1-reasoning-3"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"j1-text-4","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-4","delta":"Let me add."}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"j1-text-4"}`,
			`{"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"calculator"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{\"expression\": ","toolCallId":"call_1"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"\"2+2\"}","toolCallId":"call_1"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"call_1"}`,
			`{"type":"TOOL_CALL_RESULT","messageId":"j1-result-10","role":"tool","toolCallId":"call_1","content":"4"}`,
			`{"type":"STEP_FINISHED","stepName":"step 1"}`,
			`{"type":"STEP_STARTED","stepName":"step 3"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"j1-text-13","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-13","delta":"2+2 "}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-13","delta":"= 4"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"j1-text-13"}`,
			`{"type":"STEP_FINISHED","stepName":"step 3"}`,
			`{"type":"RUN_FINISHED","threadId":"th","runId":"j1","result":"2+2 = 4","usage":[{"inputTokens":30,"outputTokens":9,"totalTokens":39}]}`,
		},
	}, {
		name: "a retried call: held until it answers, the voided attempt never sent",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Reasoning(1, "Hmm"), gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " up"),
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 2},
			gatewaytest.Token(1, 2, "Once upon a time."), gatewaytest.Usage(1, 1, 1), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"j1-text-6","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-6","delta":"Once upon a time."}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"j1-text-6"}`,
			`{"type":"RUN_FINISHED","threadId":"th","runId":"j1","result":"Once upon a time.","usage":[{"inputTokens":1,"outputTokens":1,"totalTokens":2}]}`,
		},
	}, {
		name: "an approval requested and decided: CUSTOM events with what the Approve API needs",
		events: gatewaytest.Log(gatewaytest.Usage(1, 1, 1), approval, gatewaytest.Status(agent.StreamWaitingApproval),
			agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator"}, Approval: &agent.ApprovalEvent{Outcome: "rejected", Approver: "ops", Via: "update"}},
			gatewaytest.Status(agent.StreamRunning), gatewaytest.Call(agent.EventToolEnd, agent.ToolRejected, "")),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"calculator"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{\"expression\":\"2+2\"}","toolCallId":"call_1"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"call_1"}`,
			`{"type":"CUSTOM","name":"agentflow.approval_required","value":{"streamId":"turn/demo/j1","callId":"call_1","approvalId":"apr_0123","toolName":"calculator","args":{"expression":"2+2"},"reason":"costly","deadline":"2026-01-02T03:04:05Z"}}`,
			`{"type":"CUSTOM","name":"agentflow.approval_decided","value":{"streamId":"turn/demo/j1","callId":"call_1","toolName":"calculator","outcome":"rejected","approver":"ops","via":"update"}}`,
			`{"type":"TOOL_CALL_RESULT","messageId":"j1-result-6","role":"tool","toolCallId":"call_1","content":"the call ended rejected"}`,
		},
	}, {
		name: "custom data and progress are CUSTOM; a child's events are not the run's; the JSON answer is the result",
		events: gatewaytest.Log(
			agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2]}`)}},
			agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: "call_1", Name: "fetch", Message: "half way"}},
			agent.Event{Kind: agent.EventToken, Text: "not mine", Child: &agent.ChildEvent{CallID: "call_2", StreamID: "turn/demo/c", Index: 1}},
			agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"json","json":{"temp_c":21}}`)},
			gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"CUSTOM","name":"chart","value":{"points":[1,2]},"rawEvent":{"stream_id":"turn/demo/j1","event_index":1,"kind":"custom","custom":{"name":"chart","id":"c1","value":{"points":[1,2]}}}}`,
			`{"type":"CUSTOM","name":"agentflow.tool_progress","value":{"callId":"call_1","toolName":"fetch","message":"half way"}}`,
			`{"type":"RUN_FINISHED","threadId":"th","runId":"j1","result":{"temp_c":21}}`,
		},
	}, {
		name: "a failed turn: what was streamed, its open call ended, then RUN_ERROR with its type",
		events: gatewaytest.Log(step(agent.EventStepStart, 1, ""), gatewaytest.Token(1, 1, "Part"), gatewaytest.Args(1, `{"x"`),
			agent.Event{Kind: agent.EventError, Error: &agent.TurnError{Type: "Unavailable", Message: "the model is down"}},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed}),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"STEP_STARTED","stepName":"step 1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"j1-text-2","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-2","delta":"Part"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"j1-text-2"}`,
			`{"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"calculator"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{\"x\"","toolCallId":"call_1"}`,
			`{"type":"STEP_FINISHED","stepName":"step 1"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"call_1"}`,
			`{"type":"RUN_ERROR","message":"the model is down","code":"Unavailable"}`,
		},
	}, {
		name:   "a canceled turn is a RUN_ERROR",
		events: gatewaytest.Log(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Type: "Canceled", Message: "stopped by uma"}}),
		want: []string{
			`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
			`{"type":"RUN_ERROR","message":"stopped by uma","code":"Canceled"}`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, aguiLines(t, aguiMapAll(tc.events)))
		})
	}
}

// aguiApprovalLog is a turn whose calculator call (call_1) waits for an
// approval, then is approved and answered: the log up to the wait (its
// last event the WAITING_APPROVAL status), and the rest.
func aguiApprovalLog() (asked, rest []agent.Event) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	approval := gatewaytest.Call(agent.EventApprovalRequired, "", "")
	approval.Tool.Reason, approval.Tool.Deadline, approval.Tool.ApprovalID = "costly", &deadline, "apr_0123"
	usage := func(step, in, out int, model string) agent.Event {
		e := gatewaytest.Usage(step, in, out)
		e.Model = model
		return e
	}
	log := gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), agent.Event{Kind: agent.EventStepStart, Step: 1},
		gatewaytest.Reasoning(1, "Costly: ask."), gatewaytest.Args(1, `{"expression":"2+2"}`), usage(1, 10, 5, "openai:gpt-4o-mini"),
		approval, gatewaytest.Status(agent.StreamWaitingApproval),
		agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator"}, Approval: &agent.ApprovalEvent{Outcome: "approved", Approver: "ops", Via: "update"}},
		gatewaytest.Status(agent.StreamRunning), gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"),
		agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishToolCalls},
		agent.Event{Kind: agent.EventStepStart, Step: 3}, gatewaytest.Token(3, 1, "It is 4."), usage(3, 20, 4, "openai:gpt-4o-mini"),
		agent.Event{Kind: agent.EventStepFinish, Step: 3, FinishReason: agent.FinishStop},
		gatewaytest.Content("It is 4."), gatewaytest.Status(agent.StreamCompleted))
	return log[:7], log[7:]
}

// TestAGUIInterrupt: a 1.0 client's run ends where the turn waits for an
// approval, with RUN_FINISHED's interrupt outcome (its id naming the call,
// its payload's schema, the Approve API's values as metadata) and the
// usage so far; the run that resumes it maps the same log, sends nothing
// before the wait, goes on in the step the interrupt closed, and counts
// only its own calls' usage. An older client's run goes on.
func TestAGUIInterrupt(t *testing.T) {
	asked, rest := aguiApprovalLog()
	m := newAGUIMapper("th", "j1", "j1", true)
	var out []aguiEvent
	for i, e := range asked {
		out = append(out, m.add(e)...)
		require.Equal(t, i == len(asked)-1, m.waitsAt(e), "the run may end at the wait, only")
	}
	require.Nil(t, m.interrupt(func(aguiInterruptID) bool { return false }), "nothing waits any more: the run goes on")
	var pendingID aguiInterruptID
	out = append(out, m.interrupt(func(id aguiInterruptID) bool { pendingID = id; return true })...)
	require.Equal(t, aguiInterruptID{JobID: "j1", Kind: aguiKindApproval, ApprovalID: "apr_0123", CallID: "call_1"}, pendingID)
	require.Equal(t, []string{
		`{"type":"RUN_STARTED","threadId":"th","runId":"j1","protocolVersion":"1.0"}`,
		`{"type":"STEP_STARTED","stepName":"step 1"}`,
		`{"type":"REASONING_START","messageId":"j1-reasoning-3"}`,
		`{"type":"REASONING_MESSAGE_START","messageId":"j1-reasoning-3","role":"reasoning"}`,
		`{"type":"REASONING_MESSAGE_CONTENT","messageId":"j1-reasoning-3","delta":"Costly: ask."}`,
		`{"type":"REASONING_MESSAGE_END","messageId":"j1-reasoning-3"}`,
		`{"type":"REASONING_END","messageId":"j1-reasoning-3"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"calculator"}`,
		`{"type":"TOOL_CALL_ARGS","delta":"{\"expression\":\"2+2\"}","toolCallId":"call_1"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"call_1"}`,
		`{"type":"CUSTOM","name":"agentflow.approval_required","value":{"streamId":"turn/demo/j1","callId":"call_1","approvalId":"apr_0123","toolName":"calculator","args":{"expression":"2+2"},"reason":"costly","deadline":"2026-01-02T03:04:05Z"}}`,
		`{"type":"STEP_FINISHED","stepName":"step 1"}`,
		`{"type":"RUN_FINISHED","threadId":"th","runId":"j1","outcome":{"type":"interrupt","interrupts":[{"id":"j1/approval/apr_0123/call_1","reason":"tool_call",` +
			`"message":"Approve calculator({\"expression\":\"2+2\"})? costly","toolCallId":"call_1",` +
			`"responseSchema":{"type":"object","properties":{"approved":{"type":"boolean","description":"true runs the call, false rejects it"},"reason":{"type":"string","description":"why; the model reads it when the call is rejected"}},"required":["approved"],"additionalProperties":false},` +
			`"expiresAt":"2026-01-02T03:04:05Z","metadata":{"agentflow":{"streamId":"turn/demo/j1","callId":"call_1","approvalId":"apr_0123","toolName":"calculator","args":{"expression":"2+2"},"reason":"costly","deadline":"2026-01-02T03:04:05Z"}}}]},` +
			`"usage":[{"provider":"openai","model":"gpt-4o-mini","inputTokens":10,"outputTokens":5,"totalTokens":15}]}`,
	}, aguiLines(t, out))

	// The resume: the same log from its start, a run of its own.
	r := newAGUIMapper("th", "r2", "j1", true)
	r.resume([]string{"call_1"})
	var resumed []aguiEvent
	for _, e := range append(asked, rest...) {
		resumed = append(resumed, r.add(e)...)
		require.False(t, r.waitsAt(e), "the calls the run answers wait no more")
	}
	require.Equal(t, []string{
		`{"type":"RUN_STARTED","threadId":"th","runId":"r2","protocolVersion":"1.0"}`,
		`{"type":"STEP_STARTED","stepName":"step 1"}`,
		`{"type":"CUSTOM","name":"agentflow.approval_decided","value":{"streamId":"turn/demo/j1","callId":"call_1","toolName":"calculator","outcome":"approved","approver":"ops","via":"update"}}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"j1-result-10","role":"tool","toolCallId":"call_1","content":"4"}`,
		`{"type":"STEP_FINISHED","stepName":"step 1"}`,
		`{"type":"STEP_STARTED","stepName":"step 3"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"j1-text-13","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"j1-text-13","delta":"It is 4."}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"j1-text-13"}`,
		`{"type":"STEP_FINISHED","stepName":"step 3"}`,
		`{"type":"RUN_FINISHED","threadId":"th","runId":"r2","result":"It is 4.","outcome":{"type":"success"},"usage":[{"provider":"openai","model":"gpt-4o-mini","inputTokens":20,"outputTokens":4,"totalTokens":24}]}`,
	}, aguiLines(t, resumed))

	// An older client: no interrupt, and the run goes on to its end, as
	// before 1.0; the whole turn's usage on RUN_FINISHED.
	legacy := newAGUIMapper("th", "j1", "j1", false)
	all := aguiMapWith(legacy, append(asked, rest...))
	for _, e := range asked {
		require.False(t, legacy.waitsAt(e))
	}
	last := aguiLines(t, all[len(all)-1:])[0]
	require.Equal(t, `{"type":"RUN_FINISHED","threadId":"th","runId":"j1","result":"It is 4.","usage":[{"provider":"openai","model":"gpt-4o-mini","inputTokens":30,"outputTokens":9,"totalTokens":39}]}`, last)
}

// TestAGUIQuestionInterrupt: a question is an input_required interrupt
// whose responseSchema lists its choices; a resume that answers only some
// of a run's interrupts leaves the others open, so the resumed run ends
// again at once with them.
func TestAGUIQuestionInterrupt(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	question := func(call, text string) agent.Event {
		return agent.Event{Kind: agent.EventQuestion, Tool: &agent.ToolEvent{CallID: call, Name: "ask_user", Deadline: &deadline},
			Question: &agent.QuestionEvent{Text: text, Choices: []string{"eu", "us"}, Role: "user"}}
	}
	log := gatewaytest.Log(question("q1", "Which region?"), gatewaytest.Status(agent.StreamWaitingInput),
		question("q2", "Which zone?"), gatewaytest.Status(agent.StreamWaitingInput))
	m := newAGUIMapper("th", "j1", "j1", true)
	aguiMapWith(m, log)
	require.True(t, m.waitsAt(log[3]))
	end := m.interrupt(func(aguiInterruptID) bool { return true })
	require.Len(t, end, 1)
	require.Equal(t, "interrupt", end[0].Outcome.Type)
	in := end[0].Outcome.Interrupts
	require.Len(t, in, 2)
	require.Equal(t, "j1/question/q1", in[0].ID)
	require.Equal(t, "input_required", in[0].Reason)
	require.Equal(t, "Which region?", in[0].Message)
	require.Equal(t, "q1", in[0].ToolCallID)
	require.JSONEq(t, `{"type":"object","properties":{"answer":{"type":"string","enum":["eu","us"]}},"required":["answer"],"additionalProperties":false}`, string(in[0].ResponseSchema))
	require.Equal(t, "2026-01-02T03:04:05Z", in[0].ExpiresAt)
	require.Equal(t, projection.QuestionOf(log[0]), in[0].Metadata.Agentflow)
	require.Nil(t, end[0].Usage, "no model call: no usage")

	// Only q1 answered: the resumed run goes on at the first wait, where q2
	// is still open.
	r := newAGUIMapper("th", "r2", "j1", true)
	r.resume([]string{"q1"})
	out := aguiMapWith(r, log[:2])
	require.Equal(t, []string{`{"type":"RUN_STARTED","threadId":"th","runId":"r2","protocolVersion":"1.0"}`}, aguiLines(t, out))
	require.False(t, r.waitsAt(log[1]))
	aguiMapWith(r, log[2:])
	require.True(t, r.waitsAt(log[3]))
	again := r.interrupt(func(aguiInterruptID) bool { return true })
	require.Equal(t, []string{"j1/question/q2"}, []string{again[len(again)-1].Outcome.Interrupts[0].ID})
}

// TestAGUIUsage: a run's usage is one entry per provider and model, in
// the order first used, and sums to the turn's total; a cancelled turn
// finishes a 1.0 client's run with the cancelled outcome and its usage.
func TestAGUIUsage(t *testing.T) {
	usage := func(model string, u agent.Usage) agent.Event {
		return agent.Event{Kind: agent.EventUsage, Model: model, Usage: &u}
	}
	log := gatewaytest.Log(
		usage("openai:gpt-4o-mini", agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CachedTokens: 4}),
		usage("anthropic:claude-sonnet-4", agent.Usage{PromptTokens: 7, CompletionTokens: 9, TotalTokens: 16, ReasoningTokens: 6}),
		usage("openai:gpt-4o-mini", agent.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}),
		usage("", agent.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Type: "Canceled", Message: "stopped by uma"}})
	m := newAGUIMapper("th", "j1", "j1", true)
	out := aguiMapWith(m, log)
	require.Equal(t, `{"type":"RUN_FINISHED","threadId":"th","runId":"j1","outcome":{"type":"cancelled"},"usage":[`+
		`{"provider":"openai","model":"gpt-4o-mini","inputTokens":11,"outputTokens":7,"totalTokens":18,"cachedInputTokens":4},`+
		`{"provider":"anthropic","model":"claude-sonnet-4","inputTokens":7,"outputTokens":9,"totalTokens":16,"reasoningTokens":6},`+
		`{"inputTokens":1,"outputTokens":1,"totalTokens":2}]}`, aguiLines(t, out[len(out)-1:])[0])
	var sum agent.Usage
	for _, u := range out[len(out)-1].Usage {
		sum = sum.Add(agent.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			CachedTokens: u.CachedInputTokens, ReasoningTokens: u.ReasoningTokens})
	}
	require.Equal(t, m.p.Total(), sum, "the run's usage is the turn's total")
}

// TestAGUIInterruptID: an interrupt's id reads back as the call it names;
// ids the door does not make are refused with what is wrong.
func TestAGUIInterruptID(t *testing.T) {
	for _, id := range []aguiInterruptID{
		{JobID: "j1", Kind: aguiKindApproval, ApprovalID: "apr_0123", CallID: "call_1"},
		{JobID: "2026-x", Kind: aguiKindApproval, ApprovalID: "apr_9", CallID: "toolu/with/slashes"},
		{JobID: "j1", Kind: aguiKindQuestion, CallID: "q/1"},
	} {
		got, err := parseInterruptID(id.String())
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	for in, want := range map[string]string{
		"":                    "want",
		"j1":                  "want",
		"j1/vote/c":           "want",
		"j1/approval//call_1": "names no approval id",
		"j1/approval/apr_1":   "names no turn or no call",
		"/question/q1":        "names no turn or no call",
		"j 1/question/q1":     "may not contain spaces",
		"j1/question/ q1":     "not one a turn makes",
		"j1/approval/apr 1/c": "may not contain spaces",
		"j1/question/" + strings.Repeat("x", agent.MaxKeyLength+1): "not one a turn makes",
	} {
		_, err := parseInterruptID(in)
		require.Error(t, err, in)
		require.True(t, agent.IsCode(err, agent.CodeInvalid))
		require.Contains(t, err.Error(), want, in)
	}
}

// TestAGUICheck: a resume's answer to a call that waits is checked as
// the turn checks it before any answer is given (agui_resume.go's
// aguiGive): bound to the call's approval, one of the question's choices,
// from a holder of its role. A call that waits no more is not checked.
func TestAGUICheck(t *testing.T) {
	tok, err := gateway.NewToken("s3cret", "demo", "uma", gateway.RoleUser)
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), gateway.CallerKey{}, tok)
	approvals := []agent.PendingApproval{{CallID: "call_1", ApprovalID: "apr_1", Tool: "calculator"}}
	questions := []agent.PendingQuestion{{CallID: "q1", Question: "Which city?", Choices: []string{"Paris", "Rome"}, Role: "user"},
		{CallID: "q2", Question: "Which address?", Role: "approver"}}
	approval := func(apr, call string) aguiResume {
		return aguiResume{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindApproval, ApprovalID: apr, CallID: call}, Approved: true}
	}
	answer := func(call, text string) aguiResume {
		return aguiResume{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindQuestion, CallID: call}, Answer: text}
	}
	for _, tc := range []struct {
		name  string
		rs    aguiResume
		waits bool
		code  agent.Code // "" for none
		err   string
	}{
		{name: "the waiting call's approval", rs: approval("apr_1", "call_1"), waits: true},
		{name: "another step's approval of the call", rs: approval("apr_0", "call_1"), waits: true, code: agent.CodeNotFound, err: "is not the one tool call \"call_1\" waits with"},
		{name: "a call that waits no more", rs: approval("apr_9", "call_9")},
		{name: "a choice", rs: answer("q1", "Rome"), waits: true},
		{name: "not a choice", rs: answer("q1", "Berlin"), waits: true, code: agent.CodeInvalid, err: "one of the choices"},
		{name: "without the question's role", rs: answer("q2", "Main St"), waits: true, code: agent.CodePermissionDenied, err: "needs the role approver"},
		{name: "a question that waits no more", rs: answer("q9", "x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waits, err := aguiCheck(ctx, tc.rs, approvals, questions)
			require.Equal(t, tc.waits, waits)
			if tc.code == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, agent.IsCode(err, tc.code), "%v", err)
			require.Contains(t, err.Error(), tc.err)
		})
	}
}

// TestAGUIInputDecode: what a run's input asks for, or what is wrong with it.
func TestAGUIInputDecode(t *testing.T) {
	user := `{"id":"m1","role":"user","content":"What is 2+2?"}`
	for _, tc := range []struct {
		name, body string
		want       aguiInput
		err        string // what the error says; "" for none
	}{
		{name: "HttpAgent's input", body: `{"threadId":"t-1","runId":"r-1","state":{},"messages":[` + user + `],"tools":[],"context":[],"forwardedProps":{}}`,
			want: aguiInput{ThreadID: "t-1", RunID: "r-1", Prompt: "What is 2+2?"}},
		{name: "no ids, history, text parts, later members", body: `{"messages":[{"id":"s","role":"system","content":"be brief"},` + user +
			`,{"id":"a","role":"assistant","toolCalls":[]},{"id":"m2","role":"user","content":[{"type":"text","text":"and"},{"type":"text","text":"3+3?"}]}],"aLaterMember":{}}`,
			want: aguiInput{Prompt: "and\n3+3?"}},
		{name: "empty", body: ``, err: "the request body is empty"},
		{name: "not JSON", body: `{"messages":`, err: "not JSON"},
		{name: "two values", body: `{} {}`, err: "more after the JSON value"},
		{name: "an array", body: `[]`, err: "not a JSON object"},
		{name: "no messages", body: `{"threadId":"t"}`, err: "messages is required"},
		{name: "messages not a list", body: `{"messages":{"role":"user"}}`, err: "messages: want a list"},
		{name: "a message not an object", body: `{"messages":["hi"]}`, err: "messages[0]: want a message"},
		{name: "a bad role", body: `{"messages":[{"id":"m","role":"robot","content":"x"}]}`, err: `messages[0].role "robot" is not a role`},
		{name: "no user message", body: `{"messages":[{"id":"m","role":"assistant","content":"x"}]}`, err: "has no user message"},
		{name: "a blank user message", body: `{"messages":[{"id":"m","role":"user","content":"  "}]}`, err: "has no text"},
		{name: "content a number", body: `{"messages":[{"id":"m","role":"user","content":3}]}`, err: "messages[0].content: want a string or a list"},
		{name: "a binary part", body: `{"messages":[{"id":"m","role":"user","content":[{"type":"binary","mimeType":"image/png","url":"u"}]}]}`, err: `content[0] is a "binary" part`},
		{name: "a text part without text", body: `{"messages":[{"id":"m","role":"user","content":[{"type":"text"}]}]}`, err: "content[0].text is required"},
		{name: "a threadId with a slash", body: `{"threadId":"a/b","messages":[` + user + `]}`, err: "threadId \"a/b\" may not contain '/'"},
		{name: "a runId with a space", body: `{"runId":"a b","messages":[` + user + `]}`, err: "runId \"a b\" may not contain spaces"},
		{name: "a runId not a string", body: `{"runId":7,"messages":[` + user + `]}`, err: "RunAgentInput.runId: want a string"},
		{name: "client-side tools", body: `{"messages":[` + user + `],"tools":[{"name":"confirm","description":"ask","parameters":{}}]}`, err: "client-side tools: they are not supported"},
		{name: "tools not a list", body: `{"messages":[` + user + `],"tools":{}}`, err: "RunAgentInput.tools: want a list"},
		{name: "context not a list", body: `{"messages":[` + user + `],"context":"x"}`, err: "RunAgentInput.context: want a list"},
		{name: "a 1.0 client", body: `{"threadId":"t","runId":"r","protocolVersion":"1.0","messages":[` + user + `]}`,
			want: aguiInput{ThreadID: "t", RunID: "r", Prompt: "What is 2+2?", ProtocolVersion: "1.0"}},
		{name: "protocolVersion not a string", body: `{"protocolVersion":1,"messages":[` + user + `]}`, err: "RunAgentInput.protocolVersion: want a string"},
		{name: "a resume: answers, and no prompt", body: `{"threadId":"t","runId":"r2","messages":[` + user + `],"resume":[` +
			`{"interruptId":"j1/approval/apr_1/call_1","status":"resolved","payload":{"approved":true,"reason":"fine"},"metadata":{"sig":null}},` +
			`{"interruptId":"j1/approval/apr_2/call_2","status":"cancelled"},` +
			`{"interruptId":"j1/question/q1","status":"resolved","payload":{"answer":"eu"},"aLaterMember":1},` +
			`{"interruptId":"j1/question/q2","status":"resolved","payload":"us"}]}`,
			want: aguiInput{ThreadID: "t", RunID: "r2", Resume: []aguiResume{
				{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindApproval, ApprovalID: "apr_1", CallID: "call_1"}, Approved: true, Reason: "fine"},
				{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindApproval, ApprovalID: "apr_2", CallID: "call_2"}, Cancelled: true, Reason: aguiCancelledReason},
				{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindQuestion, CallID: "q1"}, Answer: "eu"},
				{Interrupt: aguiInterruptID{JobID: "j1", Kind: aguiKindQuestion, CallID: "q2"}, Answer: "us"},
			}}},
		{name: "an empty resume is none", body: `{"messages":[` + user + `],"resume":[]}`, want: aguiInput{Prompt: "What is 2+2?"}},
		{name: "resume not a list", body: `{"messages":[` + user + `],"resume":{}}`, err: "RunAgentInput.resume: want a list"},
		{name: "a resume without messages", body: `{"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":"x"}]}`, err: "RunAgentInput.messages: want a list"},
		{name: "a resume entry not an object", body: `{"messages":[],"resume":["j1/question/q1"]}`, err: "resume[0]: want {interruptId, status, payload?}"},
		{name: "no interruptId", body: `{"messages":[],"resume":[{"status":"resolved","payload":"x"}]}`, err: "resume[0].interruptId is required"},
		{name: "an interruptId not ours", body: `{"messages":[],"resume":[{"interruptId":"int-abc","status":"resolved","payload":"x"}]}`, err: `interruptId "int-abc" is not an interrupt of this agent's`},
		{name: "no status", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","payload":"x"}]}`, err: "resume[0].status is required"},
		{name: "a bad status", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"done","payload":"x"}]}`, err: `resume[0].status "done": want "resolved" or "cancelled"`},
		{name: "metadata not an object", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":"x","metadata":null}]}`, err: "resume[0].metadata: want an object"},
		{name: "an approval without payload", body: `{"messages":[],"resume":[{"interruptId":"j1/approval/apr_1/c","status":"resolved"}]}`, err: "resume[0].payload is required"},
		{name: "an approval without approved", body: `{"messages":[],"resume":[{"interruptId":"j1/approval/apr_1/c","status":"resolved","payload":{"reason":"x"}}]}`, err: "resume[0].payload.approved is required"},
		{name: "approved not a boolean", body: `{"messages":[],"resume":[{"interruptId":"j1/approval/apr_1/c","status":"resolved","payload":{"approved":"yes"}}]}`, err: "resume[0].payload.approved: want true or false"},
		{name: "a misspelt member", body: `{"messages":[],"resume":[{"interruptId":"j1/approval/apr_1/c","status":"resolved","payload":{"aproved":true}}]}`, err: `unknown member "aproved"`},
		{name: "edited arguments", body: `{"messages":[],"resume":[{"interruptId":"j1/approval/apr_1/c","status":"resolved","payload":{"approved":true,"editedArgs":{}}}]}`, err: "arguments cannot be edited"},
		{name: "a blank answer", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":{"answer":" "}}]}`, err: "resume[0].payload.answer has no text"},
		{name: "an answer not text", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":4}]}`, err: "resume[0].payload is required"},
		{name: "a question cancelled", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"cancelled"}]}`, err: `cancels question "q1"`},
		{name: "one interrupt twice", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":"a"},{"interruptId":"j1/question/q1","status":"resolved","payload":"b"}]}`,
			err: "resume[1] answers interrupt \"j1/question/q1\" a second time"},
		{name: "two turns", body: `{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"resolved","payload":"a"},{"interruptId":"j2/question/q1","status":"resolved","payload":"b"}]}`,
			err: "a run resumes the interrupts of one run"},
		{name: "too many answers", body: `{"messages":[],"resume":[` + strings.Repeat(`{},`, maxAGUIResumes) + `{}]}`, err: "the limit is 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := decodeAGUIInput([]byte(tc.body))
			if tc.err != "" {
				require.Error(t, err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, in)
		})
	}
}

// FuzzAGUIInput: any body is a run's input a turn takes — a prompt, or
// the answers to one turn's interrupts — or a CodeInvalid error that says
// what is wrong; never a panic.
func FuzzAGUIInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t-1","runId":"r-1","state":{},"messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`,
		`{"messages":[{"id":"m","role":"user","content":[{"type":"text","text":"a"},{"type":"binary","mimeType":"x","data":"AA=="}]}]}`,
		`{"messages":[{"id":"m","role":"tool","content":"4","toolCallId":"c"}],"tools":[{"name":"x"}]}`,
		`{"runId":null,"threadId":"","messages":null}`, `[]`, `null`, ``, `{"messages":[{}]}`,
		`{"threadId":"t","runId":"r2","protocolVersion":"1.0","messages":[],"resume":[{"interruptId":"j1/approval/apr_1/call_1","status":"resolved","payload":{"approved":false,"reason":"no"}},` +
			`{"interruptId":"j1/question/q1","status":"resolved","payload":{"answer":"eu"}},{"interruptId":"j1/approval/apr_2/c/2","status":"cancelled","payload":1}]}`,
		`{"messages":[],"resume":[{"interruptId":"j1/question/q1","status":"cancelled"},{"interruptId":"/approval/x/y"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeAGUIInput(body)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		for _, id := range []string{in.ThreadID, in.RunID} {
			if id != "" {
				require.NoError(t, agent.ValidateID("id", id))
			}
		}
		if len(in.Resume) > 0 {
			// A resume: answers to one turn's interrupts, each one an
			// interrupt the door could have made, and no prompt.
			require.Empty(t, in.Prompt)
			require.LessOrEqual(t, len(in.Resume), maxAGUIResumes)
			for _, rs := range in.Resume {
				require.Equal(t, in.Resume[0].Interrupt.JobID, rs.Interrupt.JobID)
				id, err := parseInterruptID(rs.Interrupt.String())
				require.NoError(t, err)
				require.Equal(t, rs.Interrupt, id)
				if rs.Interrupt.Kind == aguiKindQuestion {
					require.False(t, rs.Cancelled)
					require.NotEmpty(t, strings.TrimSpace(rs.Answer))
				}
			}
			return
		}
		require.NotEmpty(t, strings.TrimSpace(in.Prompt))
		require.NoError(t, agent.SendMessage{Prompt: in.Prompt}.Validate())
	})
}
