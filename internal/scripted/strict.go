package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Strict tools, as the providers check them.
//
// A tool sent with strict: true (OpenAI's function.strict, Anthropic's
// tool strict) has its schema checked against the provider's strict
// subset when the request arrives, and a schema outside it refuses the
// request with a 400 that names the place, as the providers refuse it:
//
//   - OpenAI: the root is an object; every object declares its
//     properties, lists each of them as required and sets
//     additionalProperties to false; only type, properties, required,
//     additionalProperties, items (a schema), enum, const, anyOf, $ref,
//     $defs, definitions, title, description, pattern, format, minimum,
//     maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minItems
//     and maxItems; at most 10 levels of nesting.
//   - Anthropic: every object sets additionalProperties to false (its
//     properties may be optional); the same keywords and allOf, without
//     numeric bounds, maxItems, or a minItems other than 0 or 1.
//
// Request.StrictTools names the tools that came strict. A strict OpenAI
// tool's call, as the script writes it, is sent as a strict model writes
// it: every property its schema declares is there, a property the script
// leaves out that the schema lets be null as null (in nested objects
// too), since strict mode makes a model write them all.
//
// This is the provider's side of the wire: it shares no code with
// agentflow's own rewriting of schemas (internal/llm/strictschema), so a
// test that passes has two readings of the subset agreeing.

// strictKeywords are the keywords each API's strict mode takes.
var strictKeywords = map[string]map[string]bool{
	APIOpenAI: set("type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs",
		"definitions", "title", "description", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"multipleOf", "minItems", "maxItems"),
	APIAnthropic: set("type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "allOf", "$ref",
		"$defs", "definitions", "title", "description", "pattern", "format", "minItems", "default"),
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// strictProblem is why api's strict mode refuses schema; "" when it
// takes it.
func strictProblem(api string, schema json.RawMessage) string {
	var root any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return "the schema is not JSON"
	}
	obj, ok := root.(map[string]any)
	if !ok || obj["type"] != "object" {
		return `the root must be a schema of type "object"`
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, ok := obj[k]; ok {
			return "the root must not be " + k
		}
	}
	return checkStrict(api, obj, "", 0)
}

func checkStrict(api string, s any, at string, depth int) string {
	if api == APIOpenAI && depth > 10 {
		return at + ": nested more than 10 levels deep"
	}
	obj, ok := s.(map[string]any)
	if !ok {
		return at + ": a schema must be an object"
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !strictKeywords[api][k] {
			return fmt.Sprintf("%s: %q is not permitted", at, k)
		}
	}
	if n, ok := obj["minItems"].(json.Number); ok && api == APIAnthropic && n != "0" && n != "1" {
		return at + ": minItems must be 0 or 1"
	}
	if p := checkObject(api, obj, at); p != "" {
		return p
	}
	for _, k := range []string{"properties", "$defs", "definitions"} {
		subs, _ := obj[k].(map[string]any)
		for _, name := range sortedNames(subs) {
			if p := checkStrict(api, subs[name], at+"/"+k+"/"+name, depth+1); p != "" {
				return p
			}
		}
	}
	if items, ok := obj["items"]; ok {
		if p := checkStrict(api, items, at+"/items", depth+1); p != "" {
			return p
		}
	}
	for _, k := range []string{"anyOf", "allOf"} {
		list, _ := obj[k].([]any)
		for i, sub := range list {
			if p := checkStrict(api, sub, fmt.Sprintf("%s/%s/%d", at, k, i), depth+1); p != "" {
				return p
			}
		}
	}
	return ""
}

// checkObject holds an object schema to the API's rules.
func checkObject(api string, obj map[string]any, at string) string {
	props, hasProps := obj["properties"].(map[string]any)
	isObject := hasProps || obj["type"] == "object"
	if list, ok := obj["type"].([]any); ok {
		for _, t := range list {
			isObject = isObject || t == "object"
		}
	}
	if !isObject {
		return ""
	}
	if obj["additionalProperties"] != false {
		return at + ": 'additionalProperties' is required to be supplied and to be false"
	}
	if api != APIOpenAI {
		return ""
	}
	if !hasProps {
		return at + ": an object must declare its properties"
	}
	required, _ := obj["required"].([]any)
	listed := map[any]bool{}
	for _, r := range required {
		listed[r] = true
	}
	for _, name := range sortedNames(props) {
		if !listed[name] {
			return fmt.Sprintf("%s: 'required' is required to be supplied and to be an array including every key in properties. Missing %q", at, name)
		}
	}
	return ""
}

func sortedNames(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// strictTool is a tool of a request as the strict check reads it.
type strictTool struct {
	name   string
	strict bool
	schema json.RawMessage
}

// takeStrict checks the request's strict tools and notes them in rec
// (StrictTools, and their schemas for the calls' arguments).
func takeStrict(api string, rec *Request, tools []strictTool) error {
	for _, t := range tools {
		if !t.strict {
			continue
		}
		if p := strictProblem(api, t.schema); p != "" {
			return fmt.Errorf("Invalid schema for function '%s': %s", t.name, strings.TrimPrefix(p, ": ")) //lint:ignore ST1005 the provider's own wording
		}
		rec.StrictTools = append(rec.StrictTools, t.name)
		if rec.strictSchemas == nil {
			rec.strictSchemas = map[string]json.RawMessage{}
		}
		rec.strictSchemas[t.name] = t.schema
	}
	return nil
}

// strictArguments are a strict OpenAI tool's call arguments as a strict
// model writes them: the script's, with null for every property they
// leave out that the schema lets be null. Arguments that are not a JSON
// object are sent as written.
func strictArguments(schema json.RawMessage, args string) string {
	var s, v any
	if json.Unmarshal(schema, &s) != nil {
		return args
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return args
	}
	if !fillNulls(s, v) {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return string(b)
}

// fillNulls adds, to an object value, null for each nullable property
// it lacks, in it and in the objects under it.
func fillNulls(s, v any) bool {
	obj, _ := s.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	changed := false
	switch val := v.(type) {
	case map[string]any:
		for name, ps := range props {
			x, ok := val[name]
			switch {
			case !ok && nullable(ps):
				val[name] = nil
				changed = true
			case ok && fillNulls(ps, x):
				changed = true
			}
		}
	case []any:
		for _, x := range val {
			if fillNulls(obj["items"], x) {
				changed = true
			}
		}
	}
	return changed
}

// nullable reports whether a property's schema lets it be null.
func nullable(s any) bool {
	obj, _ := s.(map[string]any)
	if obj["type"] == "null" {
		return true
	}
	if list, ok := obj["type"].([]any); ok {
		for _, t := range list {
			if t == "null" {
				return true
			}
		}
	}
	list, _ := obj["anyOf"].([]any)
	return slices.ContainsFunc(list, nullable)
}
