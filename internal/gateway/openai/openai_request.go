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
	"github.com/agentflow/agentflow/internal/words"
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

// chatParam reads one parameter of a chat completion request into req.
type chatParam func(req *chatRequest, name string, raw json.RawMessage) error

// chatParams says how each parameter of the request is read: into req, or
// checked and ignored, or refused unless it asks for nothing.
var chatParams = withIgnored(map[string]chatParam{
	"model":    readModel,
	"messages": readMessages,
	"stream": func(req *chatRequest, name string, raw json.RawMessage) error {
		return readJSON(name, raw, "a boolean", &req.Stream)
	},
	"stream_options": readStreamOptions,
	"n":              readN,

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
}, func(p chatParam) chatParam { return p }, map[string]byte{
	"temperature": '0', "top_p": '0', "presence_penalty": '0', "frequency_penalty": '0', "seed": '0',
	"max_tokens": '0', "max_completion_tokens": '0', "logit_bias": '{', "user": '"', "metadata": '{',
	"store": 't', "service_tier": '"', "prompt_cache_key": '"', "safety_identifier": '"',
	"reasoning_effort": '"', "verbosity": '"', "parallel_tool_calls": 't', "prediction": '{',
})

// withIgnored adds to params the parameters that only tune how a model
// samples or is billed, which the agent's configuration decides: each is
// accepted, if of the JSON kind kinds gives it (ignored), and dropped. as
// makes a chat completion's reader one of params'.
func withIgnored[P any](params map[string]P, as func(chatParam) P, kinds map[string]byte) map[string]P {
	for name, kind := range kinds {
		params[name] = as(ignored(kind))
	}
	return params
}

// decodeChatRequest reads a request body.
func decodeChatRequest(data []byte) (chatRequest, error) {
	var req chatRequest
	fields, err := readParams(data, &req, chatParams, "a chat completion", "model and messages")
	if err != nil {
		return req, err
	}
	if fields["stream_options"] != nil && gateway.JSONKind(fields["stream_options"]) != 'n' && !req.Stream {
		return req, badParam("stream_options", "", "stream_options is only taken with stream: true")
	}
	return req, req.checkInput("messages", "at least the user's message")
}

// checkInput: the request names its agent (model), and has messages
// (the parameter named field, which holds what) whose last, which the
// agent answers, is the user's, with text.
func (req chatRequest) checkInput(field, what string) error {
	msgs := req.Messages
	if req.Model == "" {
		return badParam("model", "", "model is required: the id of an agent (GET /v1/models lists them)")
	}
	if len(msgs) == 0 {
		return badParam(field, "", "%s is required: %s", field, what)
	}
	last := len(msgs) - 1
	switch {
	case !slices.ContainsFunc(msgs, func(m chatMessage) bool { return m.Role == roleUser }):
		return badParam(field, "", "%s has no user message: the agent answers the last message, which must be the user's", field)
	case msgs[last].Role != roleUser:
		return badParam(field, "", "%s[%d] is the %s's, the last message: the agent answers the last message, which must be the user's", field, last, msgs[last].Role)
	case strings.TrimSpace(msgs[last].Text) == "":
		return badParam(field, "", "%s[%d], the user's message to answer, has no text", field, last)
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
			name, words.Clip(f.Type, 64))
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
		field := name + "." + words.Clip(k, 64)
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
func ignored(kind byte) chatParam {
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
func refusedUnless(ok func(json.RawMessage) bool, why string) chatParam {
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
	return readMessageFields(at, fields, chatParts, "text", func(msg chatMessage, k, field string, v json.RawMessage) error {
		switch k {
		case "name":
			return ignored('"')(nil, field, v) // who spoke: the turn's caller is the token's
		case "refusal":
			if msg.Role != roleAssistant {
				return badParam(field, "", "%s: only an assistant message has a refusal", field)
			}
		case "tool_calls":
			if gateway.JSONKind(v) != 'n' && !emptyArray(v) {
				return badParam(field, codeUnsupportedParameter, "%s: %s", field, noClientTools)
			}
		case "function_call", "audio":
			if gateway.JSONKind(v) != 'n' {
				return badParam(field, codeUnsupportedParameter, "%s is not supported: an agent's conversation is text", field)
			}
		default:
			return badParam(field, codeUnknownParameter, "unknown field %q of %s: a message has role, content and name", k, at)
		}
		return nil
	})
}

// readMessageFields reads the fields of a message (at), in the order of
// their names: its role, its content as text (parts of the kinds parts
// names; first is the kind a user's message holds), and each other field
// by other, which refuses those it does not know.
func readMessageFields(at string, fields map[string]json.RawMessage, parts map[string]partKind, first string,
	other func(msg chatMessage, k, field string, v json.RawMessage) error) (chatMessage, error) {
	role, err := readRole(at, fields["role"], "system, developer, user or assistant")
	msg := chatMessage{Role: role}
	if err != nil {
		return msg, err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v, field := fields[k], at+"."+words.Clip(k, 64)
		var err error
		switch k {
		case "role":
		case "content":
			msg.Text, err = readContent(field, msg.Role, v, parts, first)
		default:
			err = other(msg, k, field, v)
		}
		if err != nil {
			return msg, err
		}
	}
	return msg, nil
}

// partKind is a kind of content part a message may hold: the member
// that holds its text (key), the members it may have beside that are
// not read (extra), and whether only an assistant's message may hold it.
type partKind struct {
	key       string
	extra     []string
	assistant bool
}

// chatParts are the parts of a chat completion's messages, by type.
var chatParts = map[string]partKind{"text": {key: "text"}, "refusal": {key: "refusal", assistant: true}}

// readContent reads a message's content, a string or an array of parts
// of the kinds parts names (first is the kind a user's message holds),
// as text: the parts' texts, joined.
func readContent(at, role string, raw json.RawMessage, parts map[string]partKind, first string) (string, error) {
	what := "a string or an array of " + first + " parts"
	if gateway.JSONKind(raw) == '"' {
		var s string
		err := readJSON(at, raw, what, &s)
		return s, err
	}
	var list []json.RawMessage
	if err := readJSON(at, raw, what, &list); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(list))
	for i, p := range list {
		text, err := readPart(fmt.Sprintf("%s[%d]", at, i), role, p, parts, first)
		if err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}

// readPart reads one content part (at) of a message of role: its text.
func readPart(at, role string, raw json.RawMessage, parts map[string]partKind, first string) (string, error) {
	var fields map[string]json.RawMessage
	if err := readJSON(at, raw, "a content part object", &fields); err != nil {
		return "", err
	}
	var typ string
	_ = json.Unmarshal(fields["type"], &typ)
	kind, ok := parts[typ]
	switch {
	case typ == "":
		return "", badParam(at+".type", "", "%s.type is required: %s", at, first)
	case !ok || kind.assistant && role != roleAssistant:
		return "", badParam(at+".type", codeUnsupportedValue, "%s is a %s part: an agent takes text parts only (%s)", at, words.Clip(typ, 64), first)
	}
	var text *string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		switch {
		case k == "type":
		case k == kind.key:
			if err := readJSON(at+"."+k, fields[k], "a string", &text); err != nil {
				return "", err
			}
		case !slices.Contains(kind.extra, k):
			return "", badParam(at+"."+words.Clip(k, 64), codeUnknownParameter, "unknown field %q of %s, a %s part", words.Clip(k, 64), at, typ)
		}
	}
	if text == nil {
		return "", badParam(at, "", "%s, a %s part, has no %s", at, typ, kind.key)
	}
	return *text, nil
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
// are all params', each read into req by its reader, a null as not
// given, in the order of their names. what is what the request is and
// want what it must hold, for errors.
func readParams[R any, P ~func(*R, string, json.RawMessage) error](data []byte, req *R, params map[string]P, what, want string) (map[string]json.RawMessage, error) {
	fields, err := gateway.BodyObject(data, "the request body is empty: want a JSON object with "+want,
		"the request body is not a JSON object: want one with "+want)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		read, ok := params[name]
		if !ok {
			return nil, badParam(name, codeUnknownParameter, "unknown parameter %q: %s takes %s", words.Clip(name, 64), what, strings.Join(slices.Sorted(maps.Keys(params)), ", "))
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
	return "", badParam(at+".role", "", "%s.role %q: want %s", at, words.Clip(role, 64), roles)
}
