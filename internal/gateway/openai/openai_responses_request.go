package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/words"
)

// What POST /v1/responses reads: one JSON object of OpenAI's create
// response request, read as strictly as a chat completion's and by the
// same rules (openai_request.go). Taken: model (the agent), input (a
// string, or message items whose content is a string or input_text parts;
// an assistant's output_text and refusal parts too), instructions,
// stream, background, text.format (text, or a JSON schema that becomes
// the turn's output schema), previous_response_id (the session of the
// response it names), store (true: a turn is always kept), metadata;
// or, instead of messages, mcp_approval_response items, decisions on the
// approval requests of the response previous_response_id names
// (openai_responses_approve.go). Accepted and ignored: what tunes how a
// model samples or is billed. Refused, naming the parameter: the
// client's own tools, conversations of OpenAI's, stored prompts, other
// items (function call outputs, item references, reasoning), images,
// files and audio, and any unknown parameter.

// responseRequest is a create response request as a turn needs it: the
// chat completion it amounts to (model, messages, stream, output
// schema), and what only a response has.
type responseRequest struct {
	chat               chatRequest
	Background         bool
	Instructions       string
	PreviousResponseID string
	// StoreFalse: store was false, which a turn cannot honour.
	StoreFalse bool
	// Approvals are the input's mcp_approval_response items: decisions
	// on the approval requests of the response previous_response_id
	// names, whose turn then goes on. Such an input has no messages.
	Approvals []approvalResponse
}

// approvalResponse is an mcp_approval_response input item: the decision
// on the approval request whose item id it names.
type approvalResponse struct {
	// At is where the item is in the request (input[i]), for errors.
	At        string
	RequestID string
	Approve   bool
	Reason    string
}

type responseParam func(req *responseRequest, name string, raw json.RawMessage) error

// asResponseParam reads a parameter a response shares with a chat
// completion as the chat completion's reader does.
func asResponseParam(read chatParam) responseParam {
	return func(req *responseRequest, name string, raw json.RawMessage) error { return read(&req.chat, name, raw) }
}

// responseParams says how each parameter of the request is read.
var responseParams = withIgnored(map[string]responseParam{
	"model": asResponseParam(readModel),
	"input": readResponseInput,
	"instructions": func(req *responseRequest, name string, raw json.RawMessage) error {
		return readJSON(name, raw, "a string", &req.Instructions)
	},
	"stream": asResponseParam(func(req *chatRequest, name string, raw json.RawMessage) error {
		return readJSON(name, raw, "a boolean", &req.Stream)
	}),
	"background": func(req *responseRequest, name string, raw json.RawMessage) error {
		return readJSON(name, raw, "a boolean", &req.Background)
	},
	"previous_response_id": func(req *responseRequest, name string, raw json.RawMessage) error {
		if err := readJSON(name, raw, "a string", &req.PreviousResponseID); err != nil {
			return err
		}
		if _, err := agent.StreamTenant(req.PreviousResponseID); err != nil {
			return &chatParamError{param: name, err: agent.Errorf(agent.CodeInvalid, "previous_response_id %q is not a response id: %s", words.Clip(req.PreviousResponseID, 64), err)}
		}
		return nil
	},
	"store": func(req *responseRequest, name string, raw json.RawMessage) error {
		var store bool
		if err := readJSON(name, raw, "a boolean", &store); err != nil {
			return err
		}
		if !store {
			return badParam(name, codeUnsupportedValue, "store: false cannot be honoured: a response is a durable turn, whose events and result are kept")
		}
		return nil
	},
	"text":           readResponseText,
	"stream_options": readResponseStreamOptions,
	// What the answer cannot honour: refused unless it asks for nothing.
	"tools":        asResponseParam(refusedUnless(emptyArray, noClientTools)),
	"tool_choice":  asResponseParam(refusedUnless(oneOf(`"none"`, `"auto"`), noClientTools)),
	"include":      asResponseParam(refusedUnless(emptyArray, "a response's items carry what they have: nothing more can be included")),
	"top_logprobs": asResponseParam(refusedUnless(oneOf(`0`), "an agent's answer has no log probabilities")),
	"conversation": asResponseParam(refusedUnless(never, "a turn's history is its session's: name the previous response (previous_response_id) or a session (header "+headerSession+")")),
	"prompt":       asResponseParam(refusedUnless(never, "an agent's instructions are its catalog's: send instructions or input")),
}, asResponseParam, map[string]byte{
	"metadata": '{', "temperature": '0', "top_p": '0', "max_output_tokens": '0', "max_tool_calls": '0',
	"user": '"', "safety_identifier": '"', "prompt_cache_key": '"', "prompt_cache_retention": '"',
	"service_tier": '"', "truncation": '"', "parallel_tool_calls": 't', "reasoning": '{',
})

// decodeResponseRequest reads a request body.
func decodeResponseRequest(data []byte) (responseRequest, error) {
	var req responseRequest
	_, err := readParams(data, &req, responseParams, "a response", "model and input")
	if err != nil {
		return req, err
	}
	if len(req.Approvals) > 0 {
		return req, req.checkDecisions()
	}
	return req, req.chat.checkInput("input", "the user's message, as a string or message items")
}

// checkDecisions: an input of mcp_approval_response items goes on with
// the turn of the response whose approval requests they answer
// (previous_response_id); it has no message, and nothing a new turn
// would take.
func (req responseRequest) checkDecisions() error {
	switch {
	case req.chat.Model == "":
		return badParam("model", "", "model is required: the id of an agent (GET /v1/models lists them)")
	case len(req.chat.Messages) > 0:
		return badParam("input", "", "input has messages and mcp_approval_response items: the decisions go on with the turn that asked them, which takes no new message; send the message once it has answered")
	case req.PreviousResponseID == "":
		return badParam("previous_response_id", "", "previous_response_id is required with mcp_approval_response items: the response whose mcp_approval_request items they answer")
	case req.Instructions != "":
		return badParam("instructions", codeUnsupportedParameter, "instructions are not taken with mcp_approval_response items: the turn that goes on has its own")
	case req.chat.OutputSchema != nil:
		return badParam("text.format", codeUnsupportedParameter, "text.format json_schema is not taken with mcp_approval_response items: the turn that goes on has its own")
	}
	return nil
}

// prompt is the turn's prompt: the instructions and the input, as a chat
// completion's system message and messages make it (chatPrompt). In a
// session, the session's transcript is the history and its agent's
// instructions are its own: the last message is the prompt, and
// instructions are refused.
func (req responseRequest) prompt(session bool) (string, error) {
	msgs := req.chat.Messages
	if req.Instructions != "" {
		if session {
			return "", badParam("instructions", codeUnsupportedParameter, "instructions are not supported in a session: its agent's instructions are its own, and its transcript is the history")
		}
		msgs = append([]chatMessage{{Role: roleDeveloper, Text: req.Instructions}}, msgs...)
	}
	prompt, err := chatPrompt(msgs, session)
	if pe, ok := errors.AsType[*chatParamError](err); ok && pe.param == "messages" {
		pe.param = "input"
	}
	return prompt, err
}

// readResponseInput reads input: a string, the user's message, or an
// array of input items.
func readResponseInput(req *responseRequest, name string, raw json.RawMessage) error {
	if gateway.JSONKind(raw) == '"' {
		var s string
		if err := readJSON(name, raw, "a string or an array of input items", &s); err != nil {
			return err
		}
		req.chat.Messages = append(req.chat.Messages, chatMessage{Role: roleUser, Text: s})
		return nil
	}
	var items []json.RawMessage
	if err := readJSON(name, raw, "a string or an array of input items", &items); err != nil {
		return err
	}
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", name, i)
		var fields map[string]json.RawMessage
		if err := readJSON(at, it, "an input item object", &fields); err != nil {
			return err
		}
		var typ string
		if t, ok := fields["type"]; ok && gateway.JSONKind(t) != 'n' {
			if err := readJSON(at+".type", t, "a string", &typ); err != nil {
				return err
			}
		}
		switch typ {
		case "", "message":
			msg, err := readInputItem(at, fields)
			if err != nil {
				return err
			}
			req.chat.Messages = append(req.chat.Messages, msg)
		case "mcp_approval_response":
			a, err := readApprovalResponse(at, it)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(req.Approvals, func(b approvalResponse) bool { return b.RequestID == a.RequestID }) {
				return badParam(at+".approval_request_id", "", "%s decides approval request %q again: decide each once", at, words.Clip(a.RequestID, 64))
			}
			req.Approvals = append(req.Approvals, a)
		case "function_call_output", "function_call", "custom_tool_call_output":
			return badParam(at+".type", codeUnsupportedValue, "%s is a %s item: %s", at, typ, noClientTools)
		default:
			return badParam(at+".type", codeUnsupportedValue, "%s is a %s item: a response takes message and mcp_approval_response items", at, words.Clip(typ, 64))
		}
	}
	return nil
}

// readApprovalResponse reads an mcp_approval_response item (at):
// approval_request_id, the id of the mcp_approval_request item it
// answers, approve, and reason, which the turn stores with the decision.
func readApprovalResponse(at string, raw json.RawMessage) (approvalResponse, error) {
	var item struct {
		Type              string  `json:"type"`
		ID                *string `json:"id"`
		ApprovalRequestID *string `json:"approval_request_id"`
		Approve           *bool   `json:"approve"`
		Reason            *string `json:"reason"`
	}
	const want = `{"type": "mcp_approval_response", "approval_request_id": "mcpr_…", "approve": true or false, "reason"?: "…"}`
	if err := readJSON(at, raw, want, &item); err != nil {
		return approvalResponse{}, err
	}
	a := approvalResponse{At: at}
	switch {
	case item.ApprovalRequestID == nil || *item.ApprovalRequestID == "":
		return a, badParam(at+".approval_request_id", "", "%s.approval_request_id is required: the id of the mcp_approval_request item it answers", at)
	case len(*item.ApprovalRequestID) > agent.MaxKeyLength:
		return a, badParam(at+".approval_request_id", "", "%s.approval_request_id is longer than %d bytes: no approval request has it", at, agent.MaxKeyLength)
	case item.Approve == nil:
		return a, badParam(at+".approve", "", "%s.approve is required: true runs the call, false rejects it", at)
	}
	a.RequestID, a.Approve = *item.ApprovalRequestID, *item.Approve
	if item.Reason != nil {
		a.Reason = *item.Reason
	}
	return a, nil
}

// readInputItem reads a message item (at) from its fields.
func readInputItem(at string, fields map[string]json.RawMessage) (chatMessage, error) {
	msg, err := readMessageFields(at, fields, inputParts, "input_text", func(_ chatMessage, k, field string, v json.RawMessage) error {
		switch k {
		case "type":
		case "id", "status", "phase":
			// An earlier output message sent back: who made it is no matter.
			if gateway.JSONKind(v) != 'n' && gateway.JSONKind(v) != '"' {
				return badParam(field, "", "%s: want a string", field)
			}
		default:
			return badParam(field, codeUnknownParameter, "unknown field %q of %s: a message item has type, role and content", words.Clip(k, 64), at)
		}
		return nil
	})
	if err != nil {
		return msg, err
	}
	if _, ok := fields["content"]; !ok {
		return msg, badParam(at+".content", "", "%s.content is required: a string or an array of input_text parts", at)
	}
	return msg, nil
}

// inputParts are the parts of a response's message items, by type: an
// earlier output message sent back may hold output_text (with its
// annotations and log probabilities) and refusal parts.
var inputParts = map[string]partKind{
	"input_text":  {key: "text"},
	"output_text": {key: "text", extra: []string{"annotations", "logprobs"}, assistant: true},
	"refusal":     {key: "refusal", assistant: true},
}

// readResponseText reads text: {"format": {"type": "text"}}, or a JSON
// schema the answer must match ({"format": {"type": "json_schema",
// "name", "schema", "strict", "description"}}), which becomes the turn's
// output schema; verbosity is a sampling setting, ignored.
func readResponseText(req *responseRequest, name string, raw json.RawMessage) error {
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity *string `json:"verbosity"`
	}
	if err := readJSON(name, raw, `{"format": {"type": "text"}} or {"format": {"type": "json_schema", "name", "schema"}}`, &t); err != nil {
		return err
	}
	if t.Format == nil {
		return nil
	}
	field := name + ".format"
	switch t.Format.Type {
	case "text":
		if t.Format.Schema != nil {
			return badParam(field+".schema", "", "%s.schema is only taken with type json_schema", field)
		}
		return nil
	case "json_schema":
	default:
		return badParam(field+".type", codeUnsupportedValue, `%s.type %q is not supported: an agent answers text, or JSON that matches a schema ({"type": "json_schema", "name", "schema"})`,
			field, words.Clip(t.Format.Type, 64))
	}
	if !agent.HasOutputSchema(t.Format.Schema) {
		return badParam(field+".schema", "", "%s.schema is required: the JSON Schema the answer must match", field)
	}
	if err := agent.CheckOutputSchema(t.Format.Schema); err != nil {
		return &chatParamError{param: field + ".schema", err: err}
	}
	req.chat.OutputSchema = t.Format.Schema
	return nil
}

// readResponseStreamOptions takes include_obfuscation, which pads
// events against length side channels: events carry none.
func readResponseStreamOptions(_ *responseRequest, name string, raw json.RawMessage) error {
	var opts struct {
		IncludeObfuscation *bool `json:"include_obfuscation"`
	}
	return readJSON(name, raw, `{"include_obfuscation": bool}`, &opts)
}
