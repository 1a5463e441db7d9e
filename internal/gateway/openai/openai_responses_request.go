package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// What POST /v1/responses reads: one JSON object of OpenAI's create
// response request, read as strictly as a chat completion's and by the
// same rules (openai_request.go). Taken: model (the agent), input (a
// string, or message items whose content is a string or input_text parts;
// an assistant's output_text and refusal parts too), instructions,
// stream, background, text.format (text, or a JSON schema that becomes
// the turn's output schema), previous_response_id (the session of the
// response it names), store (true: a turn is always kept), metadata.
// Accepted and ignored: what tunes how a model samples or is billed.
// Refused, naming the parameter: the client's own tools, conversations
// of OpenAI's, stored prompts, items other than messages (function call
// outputs, item references, reasoning), images, files and audio, and any
// unknown parameter.

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
}

type responseParam func(req *responseRequest, name string, raw json.RawMessage) error

// asResponseParam reads a parameter a response shares with a chat
// completion as the chat completion's reader does.
func asResponseParam(read func(*chatRequest, string, json.RawMessage) error) responseParam {
	return func(req *responseRequest, name string, raw json.RawMessage) error { return read(&req.chat, name, raw) }
}

// responseParams says how each parameter of the request is read.
var responseParams = map[string]responseParam{
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
			return &chatParamError{param: name, err: agent.Errorf(agent.CodeInvalid, "previous_response_id %q is not a response id: %s", agent.Clip(req.PreviousResponseID, 64), err)}
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
	"metadata":       asResponseParam(ignored('{')),

	// Sampling and billing: the agent's configuration decides them.
	"temperature":            asResponseParam(ignored('0')),
	"top_p":                  asResponseParam(ignored('0')),
	"max_output_tokens":      asResponseParam(ignored('0')),
	"max_tool_calls":         asResponseParam(ignored('0')),
	"user":                   asResponseParam(ignored('"')),
	"safety_identifier":      asResponseParam(ignored('"')),
	"prompt_cache_key":       asResponseParam(ignored('"')),
	"prompt_cache_retention": asResponseParam(ignored('"')),
	"service_tier":           asResponseParam(ignored('"')),
	"truncation":             asResponseParam(ignored('"')),
	"parallel_tool_calls":    asResponseParam(ignored('t')),
	"reasoning":              asResponseParam(ignored('{')),

	// What the answer cannot honour: refused unless it asks for nothing.
	"tools":        asResponseParam(refusedUnless(emptyArray, noClientTools)),
	"tool_choice":  asResponseParam(refusedUnless(oneOf(`"none"`, `"auto"`), noClientTools)),
	"include":      asResponseParam(refusedUnless(emptyArray, "a response's items carry what they have: nothing more can be included")),
	"top_logprobs": asResponseParam(refusedUnless(oneOf(`0`), "an agent's answer has no log probabilities")),
	"conversation": asResponseParam(refusedUnless(never, "a turn's history is its session's: name the previous response (previous_response_id) or a session (header "+headerSession+")")),
	"prompt":       asResponseParam(refusedUnless(never, "an agent's instructions are its catalog's: send instructions or input")),
}

// responseParamNames are responseParams' names, sorted, for errors.
var responseParamNames = slices.Sorted(maps.Keys(responseParams))

// decodeResponseRequest reads a request body.
func decodeResponseRequest(data []byte) (responseRequest, error) {
	var req responseRequest
	_, err := readParams(data, &req, responseParams, responseParamNames, "a response", "model and input")
	if err != nil {
		return req, err
	}
	switch {
	case req.chat.Model == "":
		return req, badParam("model", "", "model is required: the id of an agent (GET /v1/models lists them)")
	case len(req.chat.Messages) == 0:
		return req, badParam("input", "", "input is required: the user's message, as a string or message items")
	}
	return req, checkLastInput(req.chat.Messages)
}

// checkLastInput: the agent answers the last message of the input, which
// must be the user's, with text.
func checkLastInput(msgs []chatMessage) error {
	last := len(msgs) - 1
	if msgs[last].Role != roleUser {
		return badParam("input", "", "input[%d], the last item, is the %s's: the agent answers the last message, which must be the user's", last, msgs[last].Role)
	}
	if strings.TrimSpace(msgs[last].Text) == "" {
		return badParam("input", "", "input[%d], the user's message to answer, has no text", last)
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
	var pe *chatParamError
	if errors.As(err, &pe) && pe.param == "messages" {
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
		msg, err := readInputItem(fmt.Sprintf("%s[%d]", name, i), it)
		if err != nil {
			return err
		}
		req.chat.Messages = append(req.chat.Messages, msg)
	}
	return nil
}

// readInputItem reads one input item, which must be a message.
func readInputItem(at string, raw json.RawMessage) (chatMessage, error) {
	var fields map[string]json.RawMessage
	if err := readJSON(at, raw, "an input item object", &fields); err != nil {
		return chatMessage{}, err
	}
	var typ string
	if t, ok := fields["type"]; ok && gateway.JSONKind(t) != 'n' {
		if err := readJSON(at+".type", t, "a string", &typ); err != nil {
			return chatMessage{}, err
		}
	}
	switch typ {
	case "", "message":
	case "function_call_output", "function_call", "custom_tool_call_output", "mcp_approval_response":
		return chatMessage{}, badParam(at+".type", codeUnsupportedValue, "%s is a %s item: %s", at, typ, noClientTools)
	default:
		return chatMessage{}, badParam(at+".type", codeUnsupportedValue, "%s is a %s item: a response takes message items only", at, agent.Clip(typ, 64))
	}
	var msg chatMessage
	var err error
	msg.Role, err = readRole(at, fields["role"], "user, system, developer or assistant")
	if err != nil {
		return msg, err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v, field := fields[k], at+"."+agent.Clip(k, 64)
		var err error
		switch k {
		case "type", "role":
		case "content":
			msg.Text, err = readInputContent(field, msg.Role, v)
		case "id", "status", "phase":
			// An earlier output message sent back: who made it is no matter.
			if gateway.JSONKind(v) != 'n' && gateway.JSONKind(v) != '"' {
				err = badParam(field, "", "%s: want a string", field)
			}
		default:
			err = badParam(field, codeUnknownParameter, "unknown field %q of %s: a message item has type, role and content", agent.Clip(k, 64), at)
		}
		if err != nil {
			return msg, err
		}
	}
	if _, ok := fields["content"]; !ok {
		return msg, badParam(at+".content", "", "%s.content is required: a string or an array of input_text parts", at)
	}
	return msg, nil
}

// readInputContent reads a message item's content: a string, or an array
// of input_text parts (an assistant's output_text and refusal parts too),
// joined.
func readInputContent(at, role string, raw json.RawMessage) (string, error) {
	if gateway.JSONKind(raw) == '"' {
		var s string
		err := readJSON(at, raw, "a string or an array of input_text parts", &s)
		return s, err
	}
	var parts []json.RawMessage
	if err := readJSON(at, raw, "a string or an array of input_text parts", &parts); err != nil {
		return "", err
	}
	var texts []string
	for i, p := range parts {
		field := fmt.Sprintf("%s[%d]", at, i)
		var probe map[string]json.RawMessage
		if err := readJSON(field, p, "a content part object", &probe); err != nil {
			return "", err
		}
		var typ string
		_ = json.Unmarshal(probe["type"], &typ)
		key := "text"
		switch {
		case typ == "input_text", typ == "output_text" && role == roleAssistant:
		case typ == "refusal" && role == roleAssistant:
			key = "refusal"
		case typ == "":
			return "", badParam(field+".type", "", "%s.type is required: input_text", field)
		default:
			return "", badParam(field+".type", codeUnsupportedValue, "%s is a %s part: an agent takes text parts only (input_text)", field, agent.Clip(typ, 64))
		}
		var text *string
		for k, v := range probe {
			switch k {
			case "type":
			case key:
				if err := readJSON(field+"."+k, v, "a string", &text); err != nil {
					return "", err
				}
			case "annotations", "logprobs":
				if typ != "output_text" {
					return "", badParam(field+"."+k, codeUnknownParameter, "unknown field %q of %s, a %s part", k, field, typ)
				}
			default:
				return "", badParam(field+"."+agent.Clip(k, 64), codeUnknownParameter, "unknown field %q of %s, a %s part", agent.Clip(k, 64), field, typ)
			}
		}
		if text == nil {
			return "", badParam(field, "", "%s, a %s part, has no %s", field, typ, key)
		}
		texts = append(texts, *text)
	}
	return strings.Join(texts, "\n"), nil
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
			field, agent.Clip(t.Format.Type, 64))
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
