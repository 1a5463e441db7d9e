package openapi

import (
	"encoding/json"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// Slimming. What a narrowed document keeps of its operations and
// components, it keeps without their examples (of media types,
// parameters, headers and schemas: one of GitHub's is kilobytes of JSON,
// and they are referred to from components of their own), external docs,
// and the descriptions of schemas and their properties. No check reads
// them — examples are not validated — and the tool's description is made
// of operations' summaries and parameters' descriptions, which stay. So
// do extensions, but those of an OpenAPI 3 document's component schemas
// (Stripe's x-expandableFields and the like): kin-openapi reads none of
// them, while a Swagger 2.0 document's x-nullable means something to its
// conversion.
// A pinned document travels with its agent's version into every turn:
// GitHub's issue operations are a fraction of their size without them.

// slimContext says what the keys of a JSON object are.
type slimContext int

const (
	slimObject  slimContext = iota // an OpenAPI object: its keys are keywords
	slimSchema                     // a schema object
	slimNames                      // names of OpenAPI objects (responses, content, headers…)
	slimSchemas                    // names of schemas (properties, definitions…)
	slimOpaque                     // a value kept as it is (enum, default, extensions…)
)

// slimmer slims JSON values; schemaExtensions says to drop the
// extensions of schemas too.
type slimmer struct{ schemaExtensions bool }

// sectionContext is the context of a component section's members.
func sectionContext(group, section string) slimContext {
	switch {
	case group == "components" && section == "schemas", group == "" && section == "definitions":
		return slimSchema
	case section == "examples":
		return slimOpaque
	}
	return slimObject
}

// slim returns raw, a JSON value of context c, slimmed and compact; raw
// as it is when it is not JSON (the validator says what is wrong).
func (s slimmer) slim(raw json.RawMessage, c slimContext) json.RawMessage {
	v, err := agent.UnmarshalNumbers(raw) // numbers as written
	if err != nil {
		return raw
	}
	v = s.value(v, c, 0)
	out, err := agent.MarshalPlain(v)
	if err != nil {
		return raw
	}
	return out
}

func (s slimmer) value(v any, c slimContext, depth int) any {
	if depth > maxDepth || c == slimOpaque {
		return v
	}
	switch x := v.(type) {
	case []any:
		for i := range x {
			x[i] = s.value(x[i], c, depth+1)
		}
	case map[string]any:
		switch c {
		case slimNames, slimSchemas:
			inner := slimObject
			if c == slimSchemas {
				inner = slimSchema
			}
			for k, e := range x {
				if !strings.HasPrefix(k, "x-") {
					x[k] = s.value(e, inner, depth+1)
				}
			}
			return x
		}
		for k, e := range x {
			switch {
			case strings.HasPrefix(k, "x-") && c == slimSchema && s.schemaExtensions:
				delete(x, k)
				continue
			case strings.HasPrefix(k, "x-"):
				continue
			case k == "example", k == "examples", k == "externalDocs", k == "description" && c == slimSchema:
				delete(x, k)
				continue
			}
			x[k] = s.value(e, childContext(c, k, e), depth+1)
		}
	}
	return v
}

// childContext is the context of the value of key in an object of
// context parent.
func childContext(parent slimContext, key string, v any) slimContext {
	switch key {
	case "default", "enum", "const", "security", "scopes", "mapping":
		return slimOpaque // values, and maps of names to values
	case "schema", "items", "additionalProperties", "not", "additionalItems", "contains", "propertyNames",
		"if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "prefixItems":
		return slimSchema
	case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
		if parent == slimSchema {
			return slimSchemas
		}
	case "content", "responses", "headers", "links", "callbacks", "encoding", "variables":
		if parent == slimObject {
			return slimNames
		}
	case "parameters":
		if _, isMap := v.(map[string]any); parent == slimObject && !isMap {
			return slimObject // a list of parameters; a link's are expressions by name
		}
	}
	if parent == slimSchema {
		return slimOpaque // enum, default, const, discriminator, xml…: as they are
	}
	return slimObject
}
