package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// What POST /v1/chat/completions reads. The body is one JSON object of
// OpenAI's chat completion request, read strictly: every parameter is
// either taken (model, messages, stream, stream_options, n = 1), accepted
// and ignored because it only tunes how a model samples or is billed (the
// agent's own configuration decides that), or refused because the answer
// cannot honour it (the client's own tools, several choices, log
// probabilities, a response format other than text or a JSON schema,
// stop sequences, audio); an unknown
// parameter is refused too, as OpenAI refuses it. What is wrong is said,
// with the parameter, and nothing is started.

// chatRequest is a chat completion request as a turn needs it.
type chatRequest struct {
	// Model is the agent's id.
	Model    string
	Messages []chatMessage
	Stream   bool
	// IncludeUsage: stream_options.include_usage, a last chunk with the
	// usage.
	IncludeUsage bool
	// OutputSchema is response_format's json_schema.schema: the turn's
	// output schema (agent.TurnRequest.OutputSchema).
	OutputSchema json.RawMessage
}

// chatMessage is one message of the request, its content as text.
type chatMessage struct {
	Role string
	Text string
}

// chatParamError is a request error about one parameter: OpenAI's error
// names it (param) and may give a code of its own vocabulary.
type chatParamError struct {
	param, code string
	err         error
}

func (e *chatParamError) Error() string { return e.err.Error() }
func (e *chatParamError) Unwrap() error { return e.err }

// Codes of chatParamError, as OpenAI names the same mistakes.
const (
	codeUnknownParameter     = "unknown_parameter"
	codeUnsupportedParameter = "unsupported_parameter"
	codeUnsupportedValue     = "unsupported_value"
)

// badParam is an invalid request about param.
func badParam(param, code, format string, args ...any) error {
	return &chatParamError{param: param, code: code, err: agent.Errorf(agent.CodeInvalid, format, args...)}
}

// noClientTools says why the client's own tools are refused.
const noClientTools = "an agent's tools are its own and run on the server; the client's are not called, so the answer is text"

// chatParams says how each parameter of the request is read: into req, or
// checked and ignored, or refused unless it asks for nothing.
var chatParams = map[string]func(req *chatRequest, name string, raw json.RawMessage) error{
	"model":    readModel,
	"messages": readMessages,
	"stream": func(req *chatRequest, name string, raw json.RawMessage) error {
		return readJSON(name, raw, "a boolean", &req.Stream)
	},
	"stream_options": readStreamOptions,
	"n":              readN,

	// Sampling and billing: the agent's configuration decides them.
	"temperature":           ignored('0'),
	"top_p":                 ignored('0'),
	"presence_penalty":      ignored('0'),
	"frequency_penalty":     ignored('0'),
	"seed":                  ignored('0'),
	"max_tokens":            ignored('0'),
	"max_completion_tokens": ignored('0'),
	"logit_bias":            ignored('{'),
	"user":                  ignored('"'),
	"metadata":              ignored('{'),
	"store":                 ignored('t'),
	"service_tier":          ignored('"'),
	"prompt_cache_key":      ignored('"'),
	"safety_identifier":     ignored('"'),
	"reasoning_effort":      ignored('"'),
	"verbosity":             ignored('"'),
	"parallel_tool_calls":   ignored('t'),
	"prediction":            ignored('{'),

	// What the answer cannot honour: refused unless it asks for nothing.
	"tools":              refusedUnless(emptyArray, noClientTools),
	"functions":          refusedUnless(emptyArray, noClientTools),
	"tool_choice":        refusedUnless(oneOf(`"none"`, `"auto"`), noClientTools),
	"function_call":      refusedUnless(oneOf(`"none"`, `"auto"`), noClientTools),
	"response_format":    readResponseFormat,
	"logprobs":           refusedUnless(oneOf(`false`), "an agent's answer has no log probabilities"),
	"top_logprobs":       refusedUnless(oneOf(`0`), "an agent's answer has no log probabilities"),
	"stop":               refusedUnless(emptyArrayOrString, "an agent's model calls are its own: stop sequences cannot be honoured"),
	"modalities":         refusedUnless(oneOf(`["text"]`), "an agent answers with text"),
	"audio":              refusedUnless(never, "an agent answers with text"),
	"web_search_options": refusedUnless(never, "an agent searches with its own tools, if it has any"),
}

// chatParamNames are chatParams' names, sorted, for error messages.
var chatParamNames = slices.Sorted(maps.Keys(chatParams))

// decodeChatRequest reads a request body.
func decodeChatRequest(data []byte) (chatRequest, error) {
	var req chatRequest
	fields, err := readParams(data, &req, chatParams, chatParamNames, "a chat completion", "model and messages")
	if err != nil {
		return req, err
	}
	switch {
	case req.Model == "":
		return req, badParam("model", "", "model is required: the id of an agent (GET /v1/models lists them)")
	case len(req.Messages) == 0:
		return req, badParam("messages", "", "messages is required: at least the user's message")
	case fields["stream_options"] != nil && gateway.JSONKind(fields["stream_options"]) != 'n' && !req.Stream:
		return req, badParam("stream_options", "", "stream_options is only taken with stream: true")
	}
	return req, checkLastMessage(req.Messages)
}

// checkLastMessage: the agent answers the last message, which must be the
// user's.
func checkLastMessage(msgs []chatMessage) error {
	last := len(msgs) - 1
	if !slices.ContainsFunc(msgs, func(m chatMessage) bool { return m.Role == "user" }) {
		return badParam("messages", "", "messages has no user message: the agent answers the last message, which must be the user's")
	}
	if msgs[last].Role != "user" {
		return badParam("messages", "", "messages[%d] is the %s's, the last message: the agent answers the last message, which must be the user's", last, msgs[last].Role)
	}
	if strings.TrimSpace(msgs[last].Text) == "" {
		return badParam("messages", "", "messages[%d], the user's message to answer, has no text", last)
	}
	return nil
}

func readModel(req *chatRequest, name string, raw json.RawMessage) error {
	if err := readJSON(name, raw, "a string", &req.Model); err != nil {
		return err
	}
	if strings.TrimSpace(req.Model) == "" {
		return badParam(name, "", "model is required: the id of an agent (GET /v1/models lists them)")
	}
	if err := agent.ValidateID("model", req.Model); err != nil {
		return &chatParamError{param: name, err: err}
	}
	return nil
}

// readResponseFormat takes {"type": "text"}, and {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}}, whose
// schema becomes the turn's output schema. json_object is refused: an
// answer is checked against a schema, and it gives none.
func readResponseFormat(req *chatRequest, name string, raw json.RawMessage) error {
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := readJSON(name, raw, `{"type": "text"} or {"type": "json_schema", "json_schema": {"name", "schema"}}`, &f); err != nil {
		return err
	}
	switch f.Type {
	case "text":
		if f.JSONSchema != nil {
			return badParam(name+".json_schema", "", "%s.json_schema is only taken with type json_schema", name)
		}
		return nil
	case "json_schema":
	default:
		return badParam(name+".type", codeUnsupportedValue, `%s.type %q is not supported: an agent answers text, or JSON that matches a schema ({"type": "json_schema", "json_schema": {"name", "schema"}})`,
			name, agent.Clip(f.Type, 64))
	}
	if f.JSONSchema == nil || !agent.HasOutputSchema(f.JSONSchema.Schema) {
		return badParam(name+".json_schema.schema", "", "%s.json_schema.schema is required: the JSON Schema the answer must match", name)
	}
	if err := agent.CheckOutputSchema(f.JSONSchema.Schema); err != nil {
		return &chatParamError{param: name + ".json_schema.schema", err: err}
	}
	req.OutputSchema = f.JSONSchema.Schema
	return nil
}

func readN(_ *chatRequest, name string, raw json.RawMessage) error {
	var n int64
	if err := readJSON(name, raw, "an integer", &n); err != nil {
		return err
	}
	switch {
	case n < 1:
		return badParam(name, "", "n is %d: want 1", n)
	case n > 1:
		return badParam(name, codeUnsupportedValue, "n is %d: an agent's turn gives one answer; send %d requests for %d answers", n, n, n)
	}
	return nil
}

func readStreamOptions(req *chatRequest, name string, raw json.RawMessage) error {
	var opts map[string]json.RawMessage
	if err := readJSON(name, raw, "an object", &opts); err != nil {
		return err
	}
	for k, v := range opts {
		field := name + "." + agent.Clip(k, 64)
		switch k {
		case "include_usage":
			if gateway.JSONKind(v) != 'n' {
				if err := readJSON(field, v, "a boolean", &req.IncludeUsage); err != nil {
					return err
				}
			}
		case "include_obfuscation":
			// Padding against length side channels: chunks carry none.
			var b *bool
			if err := readJSON(field, v, "a boolean", &b); err != nil {
				return err
			}
		default:
			return badParam(field, codeUnknownParameter, "unknown parameter %q: stream_options takes include_usage and include_obfuscation", field)
		}
	}
	return nil
}

// ignored accepts a parameter of the JSON kind that kind begins (a
// number's is '0', a boolean's 't') and drops it.
func ignored(kind byte) func(*chatRequest, string, json.RawMessage) error {
	return func(_ *chatRequest, name string, raw json.RawMessage) error {
		got := gateway.JSONKind(raw)
		if got == kind || kind == 't' && got == 'f' {
			return nil
		}
		what := map[byte]string{'0': "a number", '{': "an object", '"': "a string", 't': "a boolean"}[kind]
		return badParam(name, "", "%s: want %s", name, what)
	}
}

// refusedUnless accepts a parameter that asks for nothing (ok), and
// refuses any other value, saying why.
func refusedUnless(ok func(json.RawMessage) bool, why string) func(*chatRequest, string, json.RawMessage) error {
	return func(_ *chatRequest, name string, raw json.RawMessage) error {
		if ok(raw) {
			return nil
		}
		return badParam(name, codeUnsupportedParameter, "%s is not supported: %s", name, why)
	}
}

func emptyArray(raw json.RawMessage) bool {
	var v []json.RawMessage
	return gateway.JSONKind(raw) == '[' && json.Unmarshal(raw, &v) == nil && len(v) == 0
}

func emptyArrayOrString(raw json.RawMessage) bool {
	var s string
	return emptyArray(raw) || gateway.JSONKind(raw) == '"' && json.Unmarshal(raw, &s) == nil && s == ""
}

func never(json.RawMessage) bool { return false }

// oneOf accepts the JSON values given, compared without insignificant
// whitespace.
func oneOf(values ...string) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return false
		}
		return slices.Contains(values, b.String())
	}
}

// readJSON decodes raw into v, or says that name wants what.
func readJSON(name string, raw json.RawMessage, what string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badParam(name, "", "%s: want %s", name, what)
	}
	return nil
}

// Message roles.
const (
	roleSystem    = "system"
	roleDeveloper = "developer"
	roleUser      = "user"
	roleAssistant = "assistant"
)

func readMessages(req *chatRequest, name string, raw json.RawMessage) error {
	var list []json.RawMessage
	if err := readJSON(name, raw, "an array of messages", &list); err != nil {
		return err
	}
	for i, m := range list {
		msg, err := readMessage(fmt.Sprintf("messages[%d]", i), m)
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, msg)
	}
	return nil
}

// readMessage reads one message: its role and its content as text.
func readMessage(at string, raw json.RawMessage) (chatMessage, error) {
	var fields map[string]json.RawMessage
	if err := readJSON(at, raw, "a message object", &fields); err != nil {
		return chatMessage{}, err
	}
	role, err := readRole(at, fields["role"], "system, developer, user or assistant")
	msg := chatMessage{Role: role}
	if err != nil {
		return msg, err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v, field := fields[k], at+"."+agent.Clip(k, 64)
		var err error
		switch k {
		case "role":
		case "content":
			msg.Text, err = readContent(field, msg.Role, v)
		case "name":
			err = ignored('"')(nil, field, v) // who spoke: the turn's caller is the token's
		case "refusal":
			if msg.Role != roleAssistant {
				err = badParam(field, "", "%s: only an assistant message has a refusal", field)
			}
		case "tool_calls":
			if gateway.JSONKind(v) != 'n' && !emptyArray(v) {
				err = badParam(field, codeUnsupportedParameter, "%s: %s", field, noClientTools)
			}
		case "function_call", "audio":
			if gateway.JSONKind(v) != 'n' {
				err = badParam(field, codeUnsupportedParameter, "%s is not supported: an agent's conversation is text", field)
			}
		default:
			err = badParam(field, codeUnknownParameter, "unknown field %q of %s: a message has role, content and name", k, at)
		}
		if err != nil {
			return msg, err
		}
	}
	return msg, nil
}

// readContent reads a message's content: a string, or an array of text
// parts (and refusal parts of an assistant), joined.
func readContent(at, role string, raw json.RawMessage) (string, error) {
	switch gateway.JSONKind(raw) {
	case 'n':
		return "", nil
	case '"':
		var s string
		err := readJSON(at, raw, "a string or an array of text parts", &s)
		return s, err
	}
	var parts []json.RawMessage
	if err := readJSON(at, raw, "a string or an array of text parts", &parts); err != nil {
		return "", err
	}
	var texts []string
	for i, p := range parts {
		var part struct {
			Type    string  `json:"type"`
			Text    *string `json:"text"`
			Refusal *string `json:"refusal"`
		}
		field := fmt.Sprintf("%s[%d]", at, i)
		var probe map[string]json.RawMessage
		if err := readJSON(field, p, "a content part object", &probe); err != nil {
			return "", err
		}
		_ = json.Unmarshal(probe["type"], &part.Type)
		switch {
		case part.Type == "text":
		case part.Type == "refusal" && role == roleAssistant:
		case part.Type == "":
			return "", badParam(field+".type", "", "%s.type is required: text", field)
		default:
			return "", badParam(field+".type", codeUnsupportedValue, "%s is a %s part: an agent takes text parts only", field, agent.Clip(part.Type, 64))
		}
		if err := readJSON(field, p, "a "+part.Type+" part: {\"type\": \""+part.Type+"\", \""+part.Type+"\": \"…\"}", &part); err != nil {
			return "", err
		}
		text := part.Text
		if part.Type == "refusal" {
			text = part.Refusal
		}
		if text == nil {
			return "", badParam(field, "", "%s, a %s part, has no %s", field, part.Type, part.Type)
		}
		texts = append(texts, *text)
	}
	return strings.Join(texts, "\n"), nil
}

// Without a session, the messages before the one to answer reach the
// turn inside its prompt, as a transcript (chatPrompt).
const (
	transcriptHead = "The conversation so far, as the client sent it (oldest first):"
	transcriptTail = "The message to answer:"
)

// chatPrompt is the turn's prompt. With a session (a Conversation), it is
// the last message's text: the session's transcript is the history, and
// the client's copy of it is not read. Without one, the messages before
// it are written before it as a transcript, each after its role; the
// prompt must then fit agent.MaxPromptBytes.
func chatPrompt(msgs []chatMessage, session bool) (string, error) {
	last := msgs[len(msgs)-1].Text
	if session || len(msgs) == 1 {
		return last, nil
	}
	var b strings.Builder
	b.WriteString(transcriptHead)
	for _, m := range msgs[:len(msgs)-1] {
		b.WriteString("\n\n")
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Text)
		if b.Len() > agent.MaxPromptBytes {
			break
		}
	}
	b.WriteString("\n\n" + transcriptTail + "\n\n")
	b.WriteString(last)
	if b.Len() > agent.MaxPromptBytes {
		return "", badParam("messages", "context_length_exceeded",
			"the messages are %d bytes or more as the turn's prompt; the limit is %d: name a session (header %s) and send only the new message, the session keeps the history",
			b.Len(), agent.MaxPromptBytes, headerSession)
	}
	return b.String(), nil
}

// readParams reads data, a request body, as one JSON object whose members
// are all params' (names: their names, sorted), each read into req by its
// reader, a null as not given, in the order of their names. what is what
// the request is and want what it must hold, for errors.
func readParams[R any, P ~func(*R, string, json.RawMessage) error](data []byte, req *R, params map[string]P, names []string, what, want string) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "the request body is empty: want a JSON object with %s", want)
	}
	if err := gateway.OneJSONValue(data); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s", err)
	}
	var fields map[string]json.RawMessage
	if gateway.JSONKind(data) != '{' || json.Unmarshal(data, &fields) != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the request body is not a JSON object: want one with %s", want)
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		read, ok := params[name]
		if !ok {
			return nil, badParam(name, codeUnknownParameter, "unknown parameter %q: %s takes %s", agent.Clip(name, 64), what, strings.Join(names, ", "))
		}
		if gateway.JSONKind(fields[name]) == 'n' {
			continue // null: not given
		}
		if err := read(req, name, fields[name]); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

// readRole reads a message's role (at.role), one of those roles names.
func readRole(at string, raw json.RawMessage, roles string) (string, error) {
	var role string
	if err := readJSON(at+".role", raw, "a string", &role); err != nil {
		return "", badParam(at+".role", "", "%s.role is required: %s", at, roles)
	}
	switch role {
	case roleSystem, roleDeveloper, roleUser, roleAssistant:
		return role, nil
	case "tool", "function":
		return "", badParam(at+".role", codeUnsupportedParameter, "%s has the role %s: %s", at, role, noClientTools)
	}
	return "", badParam(at+".role", "", "%s.role %q: want %s", at, agent.Clip(role, 64), roles)
}
