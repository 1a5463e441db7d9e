package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestDecodeChatRequest(t *testing.T) {
	user := func(text string) chatMessage { return chatMessage{Role: roleUser, Text: text} }
	for _, tc := range []struct {
		name string
		body string
		want chatRequest
	}{
		{"minimal", `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
			chatRequest{Model: "assistant", Messages: []chatMessage{user("hi")}}},
		{"streamed with usage", `{"model":"a","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},"messages":[{"role":"user","content":"hi"}]}`,
			chatRequest{Model: "a", Stream: true, IncludeUsage: true, Messages: []chatMessage{user("hi")}}},
		{"harmless parameters ignored", `{"model":"a","temperature":0.2,"top_p":1,"n":1,"user":"u1","metadata":{"k":"v"},"seed":7,"max_tokens":100,
			"store":false,"tools":[],"tool_choice":"none","response_format":{"type": "text"},"logprobs":false,"stop":[],"modalities":["text"],
			"stream":null,"messages":[{"role":"user","content":"hi","name":"ann"}]}`,
			chatRequest{Model: "a", Messages: []chatMessage{user("hi")}}},
		{"a JSON schema", `{"model":"a","response_format":{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string"}}}}},"messages":[{"role":"user","content":"hi"}]}`,
			chatRequest{Model: "a", Messages: []chatMessage{user("hi")}, OutputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		{"a conversation with text parts", `{"model":"a","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is"},{"type":"text","text":"2+2?"}]},
			{"role":"assistant","content":null,"tool_calls":[]},{"role":"assistant","content":[{"type":"refusal","refusal":"No."}]},{"role":"developer","content":"x"},{"role":"user","content":"Again?"}]}`,
			chatRequest{Model: "a", Messages: []chatMessage{{Role: roleSystem, Text: "Be brief."}, user("What is\n2+2?"), {Role: roleAssistant},
				{Role: roleAssistant, Text: "No."}, {Role: roleDeveloper, Text: "x"}, user("Again?")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeChatRequest([]byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeChatRequestRefuses(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param, code, msg string
	}{
		{"empty", ``, "", "", "the request body is empty"},
		{"not JSON", `{"model":`, "", "", "not JSON"},
		{"two values", `{} {}`, "", "", "more after the JSON value"},
		{"not an object", `[1]`, "", "", "not a JSON object"},
		{"no model", `{` + msgs + `}`, "model", "", "model is required"},
		{"model not a string", `{"model":1,` + msgs + `}`, "model", "", "model: want a string"},
		{"model with a slash", `{"model":"a/b",` + msgs + `}`, "model", "", "may not contain '/'"},
		{"no messages", `{"model":"a"}`, "messages", "", "messages is required"},
		{"empty messages", `{"model":"a","messages":[]}`, "messages", "", "messages is required"},
		{"unknown parameter", `{"model":"a","foo":1,` + msgs + `}`, "foo", codeUnknownParameter, `unknown parameter "foo"`},
		{"n=2", `{"model":"a","n":2,` + msgs + `}`, "n", codeUnsupportedValue, "n is 2: an agent's turn gives one answer"},
		{"n=0", `{"model":"a","n":0,` + msgs + `}`, "n", "", "n is 0: want 1"},
		{"n not an integer", `{"model":"a","n":1.5,` + msgs + `}`, "n", "", "n: want an integer"},
		{"client tools", `{"model":"a","tools":[{"type":"function","function":{"name":"f"}}],` + msgs + `}`, "tools", codeUnsupportedParameter, "an agent's tools are its own"},
		{"required tool choice", `{"model":"a","tool_choice":"required",` + msgs + `}`, "tool_choice", codeUnsupportedParameter, "run on the server"},
		{"json object format", `{"model":"a","response_format":{"type":"json_object"},` + msgs + `}`, "response_format.type", codeUnsupportedValue, `response_format.type "json_object" is not supported`},
		{"json schema without a schema", `{"model":"a","response_format":{"type":"json_schema","json_schema":{"name":"x"}},` + msgs + `}`, "response_format.json_schema.schema", "", "response_format.json_schema.schema is required"},
		{"json schema not of an object", `{"model":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}},` + msgs + `}`, "response_format.json_schema.schema", "", "output schema must describe a JSON object"},
		{"text with a schema", `{"model":"a","response_format":{"type":"text","json_schema":{"schema":{"type":"object"}}},` + msgs + `}`, "response_format.json_schema", "", "only taken with type json_schema"},
		{"response format with more", `{"model":"a","response_format":{"type":"text","mood":1},` + msgs + `}`, "response_format", "", "response_format: want"},
		{"logprobs", `{"model":"a","logprobs":true,` + msgs + `}`, "logprobs", codeUnsupportedParameter, "no log probabilities"},
		{"stop", `{"model":"a","stop":["\n"],` + msgs + `}`, "stop", codeUnsupportedParameter, "stop sequences"},
		{"audio", `{"model":"a","modalities":["text","audio"],` + msgs + `}`, "modalities", codeUnsupportedParameter, "answers with text"},
		{"temperature a string", `{"model":"a","temperature":"hot",` + msgs + `}`, "temperature", "", "temperature: want a number"},
		{"stream not a bool", `{"model":"a","stream":"yes",` + msgs + `}`, "stream", "", "stream: want a boolean"},
		{"stream options without stream", `{"model":"a","stream_options":{"include_usage":true},` + msgs + `}`, "stream_options", "", "only taken with stream: true"},
		{"unknown stream option", `{"model":"a","stream":true,"stream_options":{"x":1},` + msgs + `}`, "stream_options.x", codeUnknownParameter, "stream_options takes include_usage"},
		{"messages not an array", `{"model":"a","messages":{}}`, "messages", "", "messages: want an array of messages"},
		{"message not an object", `{"model":"a","messages":["hi"]}`, "messages[0]", "", "want a message object"},
		{"no role", `{"model":"a","messages":[{"content":"hi"}]}`, "messages[0].role", "", "messages[0].role is required"},
		{"unknown role", `{"model":"a","messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role", "", `"robot": want system`},
		{"tool message", `{"model":"a","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"4"}]}`, "messages[1].role", codeUnsupportedParameter, "has the role tool"},
		{"assistant tool calls", `{"model":"a","messages":[{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"user","content":"hi"}]}`, "messages[0].tool_calls", codeUnsupportedParameter, "run on the server"},
		{"unknown message field", `{"model":"a","messages":[{"role":"user","content":"hi","mood":"ok"}]}`, "messages[0].mood", codeUnknownParameter, `unknown field "mood"`},
		{"image part", `{"model":"a","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type", codeUnsupportedValue, "an agent takes text parts only"},
		{"part without type", `{"model":"a","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", "", "type is required"},
		{"text part without text", `{"model":"a","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0]", "", "has no text"},
		{"text part with more", `{"model":"a","messages":[{"role":"user","content":[{"type":"text","text":"x","cache":1}]}]}`, "messages[0].content[0].cache", codeUnknownParameter, `unknown field "cache"`},
		{"content a number", `{"model":"a","messages":[{"role":"user","content":5}]}`, "messages[0].content", "", "want a string or an array of text parts"},
		{"no user message", `{"model":"a","messages":[{"role":"system","content":"Be brief."}]}`, "messages", "", "has no user message"},
		{"ends with the assistant", `{"model":"a","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`, "messages", "", "messages[1] is the assistant's"},
		{"blank user message", `{"model":"a","messages":[{"role":"user","content":"  "}]}`, "messages", "", "has no text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeChatRequest([]byte(tc.body))
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tc.msg)
			var pe *chatParamError
			if tc.param == "" {
				require.False(t, errors.As(err, &pe), "no parameter to blame: %v", err)
				return
			}
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, tc.param, pe.param)
			require.Equal(t, tc.code, pe.code)
		})
	}
}

func TestChatPrompt(t *testing.T) {
	msgs := []chatMessage{{Role: roleSystem, Text: "Be brief."}, {Role: roleUser, Text: "What is 2+2?"}, {Role: roleAssistant, Text: "4"}, {Role: roleUser, Text: "And 3+3?"}}

	// A session's transcript is the history: the last message alone.
	p, err := chatPrompt(msgs, true)
	require.NoError(t, err)
	require.Equal(t, "And 3+3?", p)
	// One message is the prompt as it is.
	p, err = chatPrompt(msgs[3:], false)
	require.NoError(t, err)
	require.Equal(t, "And 3+3?", p)
	// Without a session, the earlier messages come first, each after its role.
	p, err = chatPrompt(msgs, false)
	require.NoError(t, err)
	require.Equal(t, transcriptHead+"\n\nsystem: Be brief.\n\nuser: What is 2+2?\n\nassistant: 4\n\n"+transcriptTail+"\n\nAnd 3+3?", p)

	// Too long a conversation for a prompt: a session keeps it instead.
	long := []chatMessage{{Role: roleUser, Text: strings.Repeat("x", agent.MaxPromptBytes)}, {Role: roleUser, Text: "hi"}}
	_, err = chatPrompt(long, false)
	var pe *chatParamError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, "messages", pe.param)
	require.Contains(t, err.Error(), "name a session (header X-Agentflow-Session)")
	p, err = chatPrompt(long, true)
	require.NoError(t, err)
	require.Equal(t, "hi", p)
}
