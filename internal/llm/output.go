package llm

import (
	"encoding/json"
	"regexp"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
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
// when the schema meets strict mode's rules (strictable), since a strict
// request with a schema that does not is refused.
func responseFormat(f OutputFormat) (json.RawMessage, error) {
	var schema any
	if err := json.Unmarshal(f.Schema, &schema); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "output schema is not JSON: %v", err)
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
	}{"json_schema", jsonSchema{Name: name, Schema: f.Schema, Strict: strictable(schema)}})
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "output schema: %v", err)
	}
	return b, nil
}

// strictKeywords are the keywords OpenAI's strict mode takes; a schema
// with any other (minLength, not, if, …) is sent without strict, which
// it would refuse.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true,
	"description": true, "title": true, "pattern": true, "format": true,
	"multipleOf": true, "maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true,
	"minItems": true, "maxItems": true,
}

// strictable reports whether a schema meets OpenAI's strict mode: it uses
// only strictKeywords, and every object schema lists each of its
// properties as required and allows no others (additionalProperties:
// false). Subschemas under properties, items, $defs, definitions and
// anyOf are held to the same.
func strictable(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		for k := range v {
			if !strictKeywords[k] {
				return false
			}
		}
		props, hasProps := v["properties"].(map[string]any)
		if hasProps || v["type"] == "object" {
			if v["additionalProperties"] != false {
				return false
			}
			required, _ := v["required"].([]any)
			for name := range props {
				if !slices.Contains(required, any(name)) {
					return false
				}
			}
		}
		for _, key := range []string{"properties", "$defs", "definitions"} {
			if m, ok := v[key].(map[string]any); ok {
				for _, sub := range m {
					if !strictable(sub) {
						return false
					}
				}
			}
		}
		for _, key := range []string{"items", "anyOf"} {
			if sub, ok := v[key]; ok && !strictable(sub) {
				return false
			}
		}
		return true
	case []any:
		for _, sub := range v {
			if !strictable(sub) {
				return false
			}
		}
		return true
	}
	return true
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
