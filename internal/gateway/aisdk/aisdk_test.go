package aisdk

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// chunkLines is chunks as one compact JSON line each, to compare.
func chunkLines(t *testing.T, chunks []uiChunk) []string {
	t.Helper()
	out := []string{}
	for _, c := range chunks {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}

func mapAll(events []agent.Event) []uiChunk { return mapAllIn(projection.Held, events) }

func mapAllIn(mode projection.Mode, events []agent.Event) []uiChunk {
	m := newUIMapper(mode)
	var out []uiChunk
	for _, e := range events {
		out = append(out, m.add(e)...)
	}
	return out
}

// TestUIMessageMapper: the chunks of the UI message stream a turn's log maps to
// (docs/events.md, "Mapping to other protocols").
func TestUIMessageMapper(t *testing.T) {
	step := func(kind agent.EventKind, n int, finish string) agent.Event {
		return agent.Event{Kind: kind, Step: n, FinishReason: finish}
	}
	for _, tc := range []struct {
		name   string
		events []agent.Event
		want   []string
	}{{
		name: "a streamed one-tool turn",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), step(agent.EventStepStart, 1, ""), gatewaytest.Reasoning(1, "The user wants 2+2."), gatewaytest.Token(1, 1, "Let me add."),
			gatewaytest.Args(1, ""), gatewaytest.Args(1, `{"expression": `), gatewaytest.Args(1, `"2+2"}`), gatewaytest.Usage(1, 10, 5),
			gatewaytest.Call(agent.EventToolStart, "", ""), gatewaytest.Call(agent.EventToolEnd, agent.ToolOK, "4"), step(agent.EventStepFinish, 1, agent.FinishToolCalls),
			step(agent.EventStepStart, 3, ""), gatewaytest.Token(3, 1, "2+2 "), gatewaytest.Token(3, 1, "= 4"), gatewaytest.Usage(3, 20, 4), step(agent.EventStepFinish, 3, agent.FinishStop),
			gatewaytest.Content("2+2 = 4"), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"start-step"}`,
			`{"type":"reasoning-start","id":"reasoning-3"}`,
			`{"type":"reasoning-delta","id":"reasoning-3","delta":"The user wants 2+2."}`,
			`{"type":"reasoning-end","id":"reasoning-3"}`,
			`{"type":"text-start","id":"text-4"}`,
			`{"type":"text-delta","id":"text-4","delta":"Let me add."}`,
			`{"type":"text-end","id":"text-4"}`,
			`{"type":"tool-input-start","toolCallId":"call_1","toolName":"calculator"}`,
			`{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"{\"expression\": "}`,
			`{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"\"2+2\"}"}`,
			`{"type":"tool-input-available","toolCallId":"call_1","toolName":"calculator","input":{"expression":"2+2"}}`,
			`{"type":"tool-output-available","toolCallId":"call_1","output":"4"}`,
			`{"type":"finish-step"}`,
			`{"type":"start-step"}`,
			`{"type":"text-start","id":"text-13"}`,
			`{"type":"text-delta","id":"text-13","delta":"2+2 "}`,
			`{"type":"text-delta","id":"text-13","delta":"= 4"}`,
			`{"type":"text-end","id":"text-13"}`,
			`{"type":"finish-step"}`,
			`{"type":"finish","finishReason":"stop","messageMetadata":{"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}}`,
		},
	}, {
		name: "an image a tool made: a file part the client fetches from the API",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "Here it is."), gatewaytest.Usage(1, 1, 1),
			agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"image","ref":"cas://sha256:ab","mime_type":"image/png","call_id":"call_1"}`)},
			agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"reasoning","text":"hidden"}`)},
			gatewaytest.Content("Here it is."), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"text-start","id":"text-2"}`,
			`{"type":"text-delta","id":"text-2","delta":"Here it is."}`,
			`{"type":"text-end","id":"text-2"}`,
			`{"type":"file","url":"/v1/files/cas:%2F%2Fsha256:ab","mediaType":"image/png"}`,
			`{"type":"finish","finishReason":"stop","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`,
		},
	}, {
		name: "a cited chunk: a source-document part",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "14 days [1]."), gatewaytest.Usage(1, 1, 1),
			gatewaytest.Content("14 days [1]."),
			agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"citation","ref":"doc_ab#2","name":"Refund policy","json":{"chunk_id":"doc_ab#2","document_id":"doc_ab","document_title":"Refund policy","position":2}}`)},
			agent.Event{Kind: agent.EventContent, Content: json.RawMessage(`{"type":"citation","ref":"doc_cd#0","json":{"chunk_id":"doc_cd#0","document_id":"doc_cd","position":0}}`)},
			gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"text-start","id":"text-2"}`,
			`{"type":"text-delta","id":"text-2","delta":"14 days [1]."}`,
			`{"type":"text-end","id":"text-2"}`,
			`{"type":"source-document","mediaType":"text/plain","sourceId":"doc_ab#2","title":"Refund policy"}`,
			`{"type":"source-document","mediaType":"text/plain","sourceId":"doc_cd#0","title":"doc_cd"}`,
			`{"type":"finish","finishReason":"stop","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`,
		},
	}, {
		name: "a retried call: held until it answers, the voided attempt never sent",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " up"),
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2, Attempt: 2},
			gatewaytest.Token(1, 2, "Once upon a time."), gatewaytest.Usage(1, 1, 1), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"text-start","id":"text-5"}`,
			`{"type":"text-delta","id":"text-5","delta":"Once upon a time."}`,
			`{"type":"text-end","id":"text-5"}`,
			`{"type":"finish","finishReason":"stop","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`,
		},
	}, {
		name: "an approval requested, then rejected",
		events: gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Usage(1, 1, 1), gatewaytest.Call(agent.EventApprovalRequired, "", ""), gatewaytest.Status(agent.StreamWaitingApproval),
			agent.Event{Kind: agent.EventApprovalDecided, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator"}, Approval: &agent.ApprovalEvent{Outcome: "rejected", Via: "update"}},
			gatewaytest.Status(agent.StreamRunning), gatewaytest.Call(agent.EventToolEnd, agent.ToolRejected, "")),
		want: []string{
			`{"type":"tool-input-start","toolCallId":"call_1","toolName":"calculator"}`,
			`{"type":"tool-input-available","toolCallId":"call_1","toolName":"calculator","input":{"expression":"2+2"}}`,
			`{"type":"tool-approval-request","toolCallId":"call_1","approvalId":"call_1"}`,
			`{"type":"tool-approval-response","approvalId":"call_1","approved":false}`,
			`{"type":"tool-output-denied","toolCallId":"call_1"}`,
		},
	}, {
		name: "an approval request's id is the call's approval id",
		events: gatewaytest.Log(agent.Event{Kind: agent.EventApprovalRequired, Tool: &agent.ToolEvent{CallID: "call_1", Name: "calculator",
			Args: json.RawMessage(`{"expression":"2+2"}`), ApprovalID: "apr_0123"}}),
		want: []string{
			`{"type":"tool-input-start","toolCallId":"call_1","toolName":"calculator"}`,
			`{"type":"tool-input-available","toolCallId":"call_1","toolName":"calculator","input":{"expression":"2+2"}}`,
			`{"type":"tool-approval-request","toolCallId":"call_1","approvalId":"apr_0123"}`,
		},
	}, {
		name: "an approved call is not announced twice; a failed call is an output error",
		events: gatewaytest.Log(gatewaytest.Call(agent.EventApprovalRequired, "", ""), gatewaytest.Call(agent.EventToolStart, "", ""),
			gatewaytest.Call(agent.EventToolEnd, agent.ToolError, "division by zero"), gatewaytest.Call(agent.EventToolEnd, agent.ToolTimedOut, "")),
		want: []string{
			`{"type":"tool-input-start","toolCallId":"call_1","toolName":"calculator"}`,
			`{"type":"tool-input-available","toolCallId":"call_1","toolName":"calculator","input":{"expression":"2+2"}}`,
			`{"type":"tool-approval-request","toolCallId":"call_1","approvalId":"call_1"}`,
			`{"type":"tool-output-error","toolCallId":"call_1","errorText":"division by zero"}`,
			`{"type":"tool-output-error","toolCallId":"call_1","errorText":"the call ended timed_out"}`,
		},
	}, {
		name: "custom data keeps its id; progress is data too; a child's events are not the message's",
		events: gatewaytest.Log(
			agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2]}`)}},
			agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: "note", Value: json.RawMessage(`"hi"`)}},
			agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: "call_1", Name: "fetch", Message: "half way"}},
			agent.Event{Kind: agent.EventToken, Text: "not mine", Child: &agent.ChildEvent{CallID: "call_2", StreamID: "turn/demo/c", Index: 1}}),
		want: []string{
			`{"type":"data-chart","id":"c1","data":{"points":[1,2]}}`,
			`{"type":"data-note","data":"hi"}`,
			`{"type":"data-tool-progress","id":"call_1","data":{"name":"fetch","message":"half way"}}`,
		},
	}, {
		name:   "an answer that was not streamed comes with its content",
		events: gatewaytest.Log(gatewaytest.Usage(1, 1, 1), step(agent.EventStepFinish, 1, agent.FinishLength), gatewaytest.Content("All at once."), gatewaytest.Status(agent.StreamCompleted)),
		want: []string{
			`{"type":"finish-step"}`,
			`{"type":"text-start","id":"content-3"}`,
			`{"type":"text-delta","id":"content-3","delta":"All at once."}`,
			`{"type":"text-end","id":"content-3"}`,
			`{"type":"finish","finishReason":"length","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`,
		},
	}, {
		name: "a failed turn: what was streamed, its error, and the end",
		events: gatewaytest.Log(gatewaytest.Token(1, 1, "Part"), agent.Event{Kind: agent.EventError, Error: &agent.TurnError{Type: "Unavailable", Message: "the model is down"}},
			agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed}),
		want: []string{
			`{"type":"text-start","id":"text-1"}`,
			`{"type":"text-delta","id":"text-1","delta":"Part"}`,
			`{"type":"text-end","id":"text-1"}`,
			`{"type":"error","errorText":"the model is down"}`,
			`{"type":"finish","finishReason":"error","messageMetadata":{"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}}`,
		},
	}, {
		name:   "a canceled turn is an abort",
		events: gatewaytest.Log(agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Type: "Canceled", Message: "stopped by uma"}}),
		want:   []string{`{"type":"abort","reason":"stopped by uma"}`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, chunkLines(t, mapAll(tc.events)))
		})
	}
}

// TestUIMessagePause: calls waiting for approval end the message with
// the tool-calls finish; the same log maps to the same part ids when read
// again.
func TestUIMessagePause(t *testing.T) {
	events := gatewaytest.Log(gatewaytest.Token(1, 1, "Checking."), gatewaytest.Usage(1, 1, 1), gatewaytest.Call(agent.EventApprovalRequired, "", ""), gatewaytest.Status(agent.StreamWaitingApproval))
	m := newUIMapper(projection.Held)
	var got []uiChunk
	for _, e := range events {
		got = append(got, m.add(e)...)
	}
	require.True(t, m.waiting["call_1"])
	got = append(got, m.pause()...)
	lines := chunkLines(t, got)
	require.Equal(t, `{"type":"finish","finishReason":"tool-calls","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`, lines[len(lines)-1])
	require.Equal(t, lines[:len(lines)-1], chunkLines(t, mapAll(events)))
}

// TestUIMessageChatDecode: what a chat request asks for, or what is wrong with it.
func TestUIMessageChatDecode(t *testing.T) {
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"What is 2+2?"}]}`
	answer := func(state, approval string) string {
		return `{"id":"c1-1","role":"assistant","metadata":{"usage":{}},"parts":[{"type":"step-start"},{"type":"text","text":"Let me check.","state":"done"},` +
			`{"type":"tool-calculator","toolCallId":"call_1","state":"` + state + `","input":{"expression":"2+2"}` + approval + `,"callProviderMetadata":{}}]}`
	}
	for _, tc := range []struct {
		name, body string
		want       uiAsk
		agent      string
		err        string // what the error says; "" for none
	}{
		{name: "a user message", body: `{"id":"c1","agent":"assistant","trigger":"submit-message","messages":[` + user + `]}`,
			agent: "assistant", want: uiAsk{Prompt: "What is 2+2?"}},
		{name: "history before it, a messageId, no agent", body: `{"id":"c1","messageId":null,"messages":[` + user + `,` + answer("output-available", "") + `,` + user + `]}`,
			want: uiAsk{Prompt: "What is 2+2?"}},
		{name: "an AI SDK 7 answer with a message steered into it", body: `{"id":"c1","messages":[` + user + `,{"id":"c1-1","role":"assistant","parts":[` +
			`{"type":"step-start"},{"type":"text","text":"Once."},{"type":"steering-message","id":"c1-2","parts":[{"type":"text","text":"a cat"}]},` +
			`{"type":"step-start"},{"type":"text","text":"A cat."}]},` + user + `]}`,
			want: uiAsk{Prompt: "What is 2+2?"}},
		{name: "approval responses", body: `{"id":"c1","trigger":"submit-message","messageId":"c1-1","messages":[` + user + `,` +
			answer("approval-responded", `,"approval":{"id":"apr_1","approved":false,"reason":"not now"}`) + `]}`,
			want: uiAsk{Answer: "c1-1", Decisions: []uiDecision{{CallID: "call_1", ApprovalID: "apr_1", Approved: false, Reason: "not now"}}}},
		{name: "not JSON", body: `{"id":`, err: "not JSON"},
		{name: "two values", body: `{} {}`, err: "more after the JSON value"},
		{name: "an array", body: `[]`, err: "not a JSON object"},
		{name: "unknown member", body: `{"id":"c1","sessionId":"x","messages":[` + user + `]}`, err: `unknown member "sessionId"`},
		{name: "no id", body: `{"messages":[` + user + `]}`, err: "id is required"},
		{name: "id with a slash", body: `{"id":"a/b","messages":[` + user + `]}`, err: "may not contain '/'"},
		{name: "id not a string", body: `{"id":7,"messages":[` + user + `]}`, err: "id: want a string"},
		{name: "no messages", body: `{"id":"c1"}`, err: "messages is required"},
		{name: "empty messages", body: `{"id":"c1","messages":[]}`, err: "messages is empty"},
		{name: "unknown trigger", body: `{"id":"c1","trigger":"resume-stream","messages":[` + user + `]}`, err: `trigger "resume-stream"`},
		{name: "a message's unknown member", body: `{"id":"c1","messages":[{"id":"m","role":"user","content":"hi","parts":[]}]}`, err: `messages[0]: unknown member "content"`},
		{name: "a bad role", body: `{"id":"c1","messages":[{"id":"m","role":"tool","parts":[]}]}`, err: `messages[0].role "tool"`},
		{name: "no parts", body: `{"id":"c1","messages":[{"id":"m","role":"user"}]}`, err: "messages[0].parts is required"},
		{name: "an unknown part", body: `{"id":"c1","messages":[{"id":"m","role":"user","parts":[{"type":"image"}]}]}`, err: `messages[0].parts[0].type "image" is not a part type`},
		{name: "a text part without text", body: `{"id":"c1","messages":[{"id":"m","role":"user","parts":[{"type":"text"}]}]}`, err: "messages[0].parts[0].text is required"},
		{name: "a tool part without a call", body: `{"id":"c1","messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-x","state":"input-available"}]}]}`, err: "toolCallId is required"},
		{name: "a tool part's bad state", body: `{"id":"c1","messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-x","toolCallId":"c","state":"done"}]}]}`, err: `state "done"`},
		{name: "a response without its answer", body: `{"id":"c1","messages":[` + answer("approval-responded", `,"approval":{"id":"call_1"}`) + `]}`, err: "its approval needs id and approved"},
		{name: "an approval's unknown member", body: `{"id":"c1","messages":[` + answer("approval-responded", `,"approval":{"id":"call_1","approved":true,"by":"me"}`) + `]}`, err: "approval: want an object"},
		{name: "the assistant's last, with no response", body: `{"id":"c1","messages":[` + user + `,` + answer("output-available", "") + `]}`, err: "answers no tool approval"},
		{name: "a regenerate after the answer", body: `{"id":"c1","trigger":"regenerate-message","messages":[` + answer("approval-responded", `,"approval":{"id":"call_1","approved":true}`) + `]}`, err: "must be last"},
		{name: "the system's last", body: `{"id":"c1","messages":[{"id":"s","role":"system","parts":[{"type":"text","text":"x"}]}]}`, err: "is the system's"},
		{name: "a file to the agent", body: `{"id":"c1","messages":[{"id":"m","role":"user","parts":[{"type":"text","text":"see"},{"type":"file","mediaType":"image/png","url":"data:"}]}]}`, err: "is a file part"},
		{name: "no text", body: `{"id":"c1","messages":[{"id":"m","role":"user","parts":[{"type":"text","text":"  "}]}]}`, err: "has no text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeUIChat([]byte(tc.body))
			var ask uiAsk
			if err == nil {
				ask, err = req.ask()
			}
			if tc.err != "" {
				require.Error(t, err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "c1", req.ChatID)
			require.Equal(t, tc.agent, req.Agent)
			require.Equal(t, tc.want, ask)
		})
	}
}

// FuzzUIMessageChat: any body is a chat request that asks for a message
// the turn takes or for decisions of calls, or a CodeInvalid error that
// says what is wrong; never a panic.
func FuzzUIMessageChat(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","agent":"assistant","trigger":"submit-message","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
		`{"id":"c1","messageId":"c1-1","messages":[{"id":"c1-1","role":"assistant","metadata":{},"parts":[{"type":"step-start"},{"type":"reasoning","text":"r"},` +
			`{"type":"tool-calc","toolCallId":"k","state":"approval-responded","input":{},"approval":{"id":"k","approved":true,"reason":"ok"}},` +
			`{"type":"dynamic-tool","toolName":"d","toolCallId":"j","state":"output-available","output":1},{"type":"data-x","id":"1","data":null},` +
			`{"type":"steering-message","id":"c1-2","parts":[{"type":"text","text":"a cat"}]}]}]}`,
		`{"id":"c1","trigger":"regenerate-message","messages":[{"id":"m","role":"user","parts":[{"type":"file","url":"u","mediaType":"t"}]}]}`,
		`{"id":"","messages":null}`, `[]`, `null`, ``, `{"id":"c","messages":[{"id":"m","role":"user","parts":[{"type":"tool-"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeUIChat(body)
		var ask uiAsk
		if err == nil {
			ask, err = req.ask()
		}
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, agent.ValidateID("id", req.ChatID))
		if len(ask.Decisions) > 0 {
			require.NoError(t, agent.ValidateID("answer", ask.Answer))
			for _, d := range ask.Decisions {
				require.NotEmpty(t, d.CallID)
			}
			return
		}
		// What the Conversation will check of the message, it passes.
		if len(ask.Prompt) <= agent.MaxPromptBytes {
			require.NoError(t, agent.SendMessage{Prompt: ask.Prompt}.Validate())
		}
		require.NotEmpty(t, strings.TrimSpace(ask.Prompt))
	})
}

// TestUIMessageMapperLive: a client of AI SDK 7 gets each delta as it is
// logged; a retried call is reset-step, with no text-end of the dropped
// part and no start-step after it, and the retry starts its part again
// under an id of its own.
func TestUIMessageMapperLive(t *testing.T) {
	step := func(kind agent.EventKind, n int, finish string) agent.Event {
		return agent.Event{Kind: kind, Step: n, FinishReason: finish}
	}
	events := gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), step(agent.EventStepStart, 1, ""), gatewaytest.Reasoning(1, "Hmm."),
		gatewaytest.Token(1, 1, "Once"), gatewaytest.Token(1, 1, " up"), gatewaytest.Args(1, ""),
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 3, Attempt: 2, Step: 1},
		gatewaytest.Token(1, 2, "Once"), gatewaytest.Token(1, 2, " upon a time."), gatewaytest.Usage(1, 1, 1), step(agent.EventStepFinish, 1, agent.FinishStop),
		gatewaytest.Content("Once upon a time."), gatewaytest.Status(agent.StreamCompleted))
	require.Equal(t, []string{
		`{"type":"start-step"}`,
		`{"type":"reasoning-start","id":"reasoning-3"}`,
		`{"type":"reasoning-delta","id":"reasoning-3","delta":"Hmm."}`,
		`{"type":"reasoning-end","id":"reasoning-3"}`,
		`{"type":"text-start","id":"text-4"}`,
		`{"type":"text-delta","id":"text-4","delta":"Once"}`,
		`{"type":"text-delta","id":"text-4","delta":" up"}`,
		`{"type":"text-end","id":"text-4"}`,
		`{"type":"tool-input-start","toolCallId":"call_1","toolName":"calculator"}`,
		`{"type":"reset-step"}`,
		`{"type":"text-start","id":"text-8"}`,
		`{"type":"text-delta","id":"text-8","delta":"Once"}`,
		`{"type":"text-delta","id":"text-8","delta":" upon a time."}`,
		`{"type":"text-end","id":"text-8"}`,
		`{"type":"finish-step"}`,
		`{"type":"finish","finishReason":"stop","messageMetadata":{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}`,
	}, chunkLines(t, mapAllIn(projection.Live, events)))
	// A client of AI SDK 5 or 6 gets the same log with the call's text
	// once it has answered, and no chunk it does not know.
	for _, c := range mapAll(events) {
		require.NotEqual(t, "reset-step", c.Type)
	}

	// A message steered in is a steering-message part for AI SDK 7 only.
	steered := gatewaytest.Log(gatewaytest.Usage(1, 1, 1), step(agent.EventStepFinish, 1, agent.FinishStop),
		agent.Event{Kind: agent.EventSteered, Message: &agent.MessageEvent{ID: "c1-2"}, Text: "make it about a cat"}, step(agent.EventStepStart, 3, ""))
	require.Equal(t, []string{`{"type":"finish-step"}`, `{"type":"steering-message","id":"c1-2","parts":[{"type":"text","text":"make it about a cat"}]}`,
		`{"type":"start-step"}`}, chunkLines(t, mapAllIn(projection.Live, steered)))
	require.Equal(t, []string{`{"type":"finish-step"}`, `{"type":"start-step"}`}, chunkLines(t, mapAll(steered)))
}

// TestUIMessageQuery: which stream a chat route's query asks for, or what
// is wrong with it.
func TestUIMessageQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  projection.Mode
		err   string
	}{
		{query: "", want: projection.Held},
		{query: "ai_sdk=5", want: projection.Held},
		{query: "ai_sdk=6", want: projection.Held},
		{query: "ai_sdk=7", want: projection.Live},
		{query: "ai_sdk=", want: projection.Held},
		{query: "ai_sdk=8", err: `ai_sdk="8": want the AI SDK's major version, 5, 6 or 7`},
		{query: "ai_sdk=v7", err: `ai_sdk="v7"`},
		{query: "ai_sdk=7&ai_sdk=7", err: "given 2 times"},
		{query: "after_index=3", err: `unknown query parameter "after_index"`},
		{query: "AI_SDK=7", err: `unknown query parameter "AI_SDK"`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			require.NoError(t, err)
			mode, err := decodeUIQuery(q)
			if tc.err != "" {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, mode)
		})
	}
}

// FuzzUIMessageQuery: any query of a chat route is a mode, Held unless it
// asks for AI SDK 7, or a CodeInvalid error that says what is wrong;
// never a panic.
func FuzzUIMessageQuery(f *testing.F) {
	for _, s := range []string{"", "ai_sdk=7", "ai_sdk=6", "ai_sdk=7&ai_sdk=6", "x=1", "ai_sdk=%ff", "ai_sdk", "&&=", "ai_sdk=7;x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw) // what the request's URL.Query keeps of it
		mode, err := decodeUIQuery(q)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.Equal(t, q.Get(uiSDKParam) == "7", mode == projection.Live)
	})
}
