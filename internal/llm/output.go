package llm

import (
	"encoding/json"
	"regexp"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// OutputFormat asks a model for an answer that is a JSON object matching
// a JSON Schema.
//
// langchaingo v0.1.14 cannot send OpenAI's json_schema response format
// per call: its per-call option (llms.WithJSONMode) sends only
// {"type": "json_object"}, and its ResponseFormat is fixed when a client
// is built and holds a schema in a struct that drops most of JSON Schema
// (anyOf, minimum, pattern, const, …). So a call sends JSON mode through
// langchaingo, and the transport puts the whole response_format into the
// request body (callState.responseFormat). The Anthropic client has no
// structured-output option: the schema is given to the model in a system
// message instead.
type OutputFormat struct {
	// Name names the schema for the provider (OpenAI's json_schema.name,
	// ^[a-zA-Z0-9_-]{1,64}$); "" or another value means "output".
	Name string
	// Schema is the JSON Schema, its root a JSON object's (compiled by
	// the caller: internal/structured).
	Schema json.RawMessage
}

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// responseFormat is OpenAI's response_format for f: json_schema, strict
// when the schema is in strict mode's subset as it is written
// (strictschema.Check: the answer is checked against the schema as
// written, so it is not rewritten as a tool's is), since a strict request
// with a schema that is not is refused.
func responseFormat(f OutputFormat) (json.RawMessage, error) {
	if !json.Valid(f.Schema) {
		return nil, agent.Errorf(agent.CodeInvalid, "output schema is not JSON")
	}
	name := f.Name
	if !schemaName.MatchString(name) {
		name = "output"
	}
	type jsonSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	}
	b, err := json.Marshal(struct {
		Type       string     `json:"type"`
		JSONSchema jsonSchema `json:"json_schema"`
	}{"json_schema", jsonSchema{Name: name, Schema: f.Schema, Strict: strictschema.Check(strictschema.OpenAI, f.Schema) == nil}})
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "output schema: %v", err)
	}
	return b, nil
}

// withSchemaInstruction tells a model without a structured-output
// option what to answer with, in a system message after the
// conversation's leading system messages.
func withSchemaInstruction(msgs []agent.Message, f OutputFormat) []agent.Message {
	text := "Answer with only a JSON object that matches this JSON Schema, without any other text or code fences:\n" + string(f.Schema)
	i := 0
	for i < len(msgs) && msgs[i].Role == agent.RoleSystem {
		i++
	}
	out := make([]agent.Message, 0, len(msgs)+1)
	out = append(out, msgs[:i]...)
	out = append(out, agent.Message{Role: agent.RoleSystem, Content: text})
	return append(out, msgs[i:]...)
}
