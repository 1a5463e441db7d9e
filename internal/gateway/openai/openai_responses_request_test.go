package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestDecodeResponseRequest(t *testing.T) {
	user := func(text string) chatMessage { return chatMessage{Role: roleUser, Text: text} }
	for _, tc := range []struct {
		name, body string
		want       responseRequest
		prompt     string
	}{
		{"a string", `{"model":"assistant","input":"hi"}`,
			responseRequest{chat: chatRequest{Model: "assistant", Messages: []chatMessage{user("hi")}}}, "hi"},
		{"streamed in the background", `{"model":"a","input":"hi","stream":true,"background":true,"store":true,"stream_options":{"include_obfuscation":false}}`,
			responseRequest{chat: chatRequest{Model: "a", Stream: true, Messages: []chatMessage{user("hi")}}, Background: true}, "hi"},
		{"harmless parameters ignored", `{"model":"a","input":"hi","temperature":0.2,"top_p":1,"max_output_tokens":9,"user":"u","metadata":{"k":"v"},
			"reasoning":{"effort":"low"},"truncation":"auto","parallel_tool_calls":true,"tools":[],"tool_choice":"auto","include":[],"text":{"format":{"type":"text"},"verbosity":"low"},"previous_response_id":null}`,
			responseRequest{chat: chatRequest{Model: "a", Messages: []chatMessage{user("hi")}}}, "hi"},
		{"a JSON schema", `{"model":"a","input":"hi","text":{"format":{"type":"json_schema","name":"trip","strict":true,"schema":{"type":"object"}}}}`,
			responseRequest{chat: chatRequest{Model: "a", Messages: []chatMessage{user("hi")}, OutputSchema: []byte(`{"type":"object"}`)}}, "hi"},
		{"message items", `{"model":"a","instructions":"Be brief.","input":[{"role":"user","content":"What is 2+2?"},
			{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"4","annotations":[]}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"And"},{"type":"input_text","text":"3+3?"}]}]}`,
			responseRequest{chat: chatRequest{Model: "a", Messages: []chatMessage{user("What is 2+2?"), {Role: roleAssistant, Text: "4"}, user("And\n3+3?")}}, Instructions: "Be brief."},
			transcriptHead + "\n\ndeveloper: Be brief.\n\nuser: What is 2+2?\n\nassistant: 4\n\n" + transcriptTail + "\n\nAnd\n3+3?"},
		{"the previous response", `{"model":"a","input":"hi","previous_response_id":"turn/demo/j1"}`,
			responseRequest{chat: chatRequest{Model: "a", Messages: []chatMessage{user("hi")}}, PreviousResponseID: "turn/demo/j1"}, "hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeResponseRequest([]byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			prompt, err := got.prompt(false)
			require.NoError(t, err)
			require.Equal(t, tc.prompt, prompt)
		})
	}
}

func TestDecodeResponseRequestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, body, param, code, msg string
	}{
		{"empty", ``, "", "", "the request body is empty"},
		{"not JSON", `{"model":`, "", "", "not JSON"},
		{"not an object", `[1]`, "", "", "not a JSON object"},
		{"no model", `{"input":"hi"}`, "model", "", "model is required"},
		{"no input", `{"model":"a"}`, "input", "", "input is required"},
		{"input not text", `{"model":"a","input":7}`, "input", "", "want a string or an array of input items"},
		{"unknown parameter", `{"model":"a","input":"hi","foo":1}`, "foo", codeUnknownParameter, `unknown parameter "foo"`},
		{"store false", `{"model":"a","input":"hi","store":false}`, "store", codeUnsupportedValue, "store: false cannot be honoured"},
		{"client tools", `{"model":"a","input":"hi","tools":[{"type":"function","name":"f"}]}`, "tools", codeUnsupportedParameter, "run on the server"},
		{"a conversation", `{"model":"a","input":"hi","conversation":"conv_1"}`, "conversation", codeUnsupportedParameter, "previous_response_id"},
		{"a stored prompt", `{"model":"a","input":"hi","prompt":{"id":"p"}}`, "prompt", codeUnsupportedParameter, "catalog"},
		{"include", `{"model":"a","input":"hi","include":["reasoning.encrypted_content"]}`, "include", codeUnsupportedParameter, "nothing more"},
		{"a function call output", `{"model":"a","input":[{"type":"function_call_output","call_id":"c","output":"4"}]}`, "input[0].type", codeUnsupportedValue, "function_call_output item"},
		{"an item reference", `{"model":"a","input":[{"type":"item_reference","id":"x"}]}`, "input[0].type", codeUnsupportedValue, "takes message and mcp_approval_response items"},
		{"an image", `{"model":"a","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type", codeUnsupportedValue, "text parts only"},
		{"a part without text", `{"model":"a","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0]", "", "has no text"},
		{"a part with more", `{"model":"a","input":[{"role":"user","content":[{"type":"input_text","text":"x","foo":1}]}]}`, "input[0].content[0].foo", codeUnknownParameter, `unknown field "foo"`},
		{"no role", `{"model":"a","input":[{"content":"x"}]}`, "input[0].role", "", "role is required"},
		{"a tool role", `{"model":"a","input":[{"role":"tool","content":"x"}]}`, "input[0].role", codeUnsupportedParameter, "has the role tool: an agent's tools are its own"},
		{"no content", `{"model":"a","input":[{"role":"user"}]}`, "input[0].content", "", "content is required"},
		{"an unknown item field", `{"model":"a","input":[{"role":"user","content":"x","x":1}]}`, "input[0].x", codeUnknownParameter, `unknown field "x"`},
		{"the last is the assistant's", `{"model":"a","input":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`, "input", "", "must be the user's"},
		{"an empty message", `{"model":"a","input":" "}`, "input", "", "has no text"},
		{"json_object", `{"model":"a","input":"hi","text":{"format":{"type":"json_object"}}}`, "text.format.type", codeUnsupportedValue, "not supported"},
		{"a schema missing", `{"model":"a","input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", "", "schema is required"},
		{"a previous response that is no id", `{"model":"a","input":"hi","previous_response_id":"resp_123"}`, "previous_response_id", "", "is not a response id"},
		{"logprobs", `{"model":"a","input":"hi","top_logprobs":3}`, "top_logprobs", codeUnsupportedParameter, "no log probabilities"},
		{"a number where a string goes", `{"model":"a","input":"hi","user":5}`, "user", "", "want a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeResponseRequest([]byte(tc.body))
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tc.msg)
			var pe *chatParamError
			if tc.param == "" {
				require.False(t, errors.As(err, &pe), "no parameter: %v", err)
				return
			}
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, tc.param, pe.param)
			require.Equal(t, tc.code, pe.code)
		})
	}
}

// TestResponsePromptInASession: in a session the last message is the
// prompt, and instructions are refused: the session's agent has its own.
func TestResponsePromptInASession(t *testing.T) {
	req, err := decodeResponseRequest([]byte(`{"model":"a","input":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`))
	require.NoError(t, err)
	prompt, err := req.prompt(true)
	require.NoError(t, err)
	require.Equal(t, "y", prompt)
	req.Instructions = "Be brief."
	_, err = req.prompt(true)
	var pe *chatParamError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, "instructions", pe.param)
}

// TestDecodeApprovalResponses: mcp_approval_response items are decisions
// on the approval requests of the response previous_response_id names,
// and an input of them has nothing a new turn would take; a malformed
// one is refused, naming what is wrong.
func TestDecodeApprovalResponses(t *testing.T) {
	const prev = `"model":"careful","previous_response_id":"turn/demo/j1"`
	req, err := decodeResponseRequest([]byte(`{` + prev + `,"stream":true,"input":[` +
		`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true},` +
		`{"type":"mcp_approval_response","id":"mcpa_x","approval_request_id":"mcpr_2","approve":false,"reason":"not today"}]}`))
	require.NoError(t, err)
	require.Equal(t, []approvalResponse{{At: "input[0]", RequestID: "mcpr_1", Approve: true}, {At: "input[1]", RequestID: "mcpr_2", Reason: "not today"}}, req.Approvals)
	require.Empty(t, req.chat.Messages)
	require.True(t, req.chat.Stream)

	item := func(fields string) string {
		return `{` + prev + `,"input":[{"type":"mcp_approval_response"` + fields + `}]}`
	}
	for _, tc := range []struct {
		name, body, param, code, msg string
	}{
		{"no request id", item(`,"approve":true`), "input[0].approval_request_id", "", "approval_request_id is required"},
		{"an empty request id", item(`,"approval_request_id":"","approve":true`), "input[0].approval_request_id", "", "approval_request_id is required"},
		{"a request id too long", item(`,"approval_request_id":"` + strings.Repeat("x", agent.MaxKeyLength+1) + `","approve":true`), "input[0].approval_request_id", "", "longer than"},
		{"no approve", item(`,"approval_request_id":"mcpr_1"`), "input[0].approve", "", "approve is required"},
		{"approve not a boolean", item(`,"approval_request_id":"mcpr_1","approve":"yes"`), "input[0]", "", "want {\"type\": \"mcp_approval_response\""},
		{"an unknown field", item(`,"approval_request_id":"mcpr_1","approve":true,"scope":"session"`), "input[0]", "", "want {\"type\": \"mcp_approval_response\""},
		{"a reason not a string", item(`,"approval_request_id":"mcpr_1","approve":true,"reason":5`), "input[0]", "", "want"},
		{"one request decided twice", `{` + prev + `,"input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true},{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":false}]}`,
			"input[1].approval_request_id", "", "decide each once"},
		{"no previous response", `{"model":"a","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
			"previous_response_id", "", "previous_response_id is required with mcp_approval_response items"},
		{"with a message", `{` + prev + `,"input":[{"role":"user","content":"hi"},{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
			"input", "", "takes no new message"},
		{"with instructions", `{` + prev + `,"instructions":"Be brief.","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
			"instructions", codeUnsupportedParameter, "not taken with mcp_approval_response"},
		{"with a schema", `{` + prev + `,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
			"text.format", codeUnsupportedParameter, "not taken with mcp_approval_response"},
		{"no model", `{"previous_response_id":"turn/demo/j1","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
			"model", "", "model is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeResponseRequest([]byte(tc.body))
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), tc.msg)
			var pe *chatParamError
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, tc.param, pe.param)
			require.Equal(t, tc.code, pe.code)
		})
	}
}
