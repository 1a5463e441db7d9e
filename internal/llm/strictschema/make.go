package strictschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Dialect is a provider's strict mode: the subset of JSON Schema it takes.
type Dialect string

// The dialects (see the package doc).
const (
	OpenAI    Dialect = "openai"
	Anthropic Dialect = "anthropic"
)

// Bounds of a strict schema (OpenAI's, which Anthropic's are within).
const (
	MaxDepth      = 10
	MaxProperties = 5000
	MaxEnumValues = 1000
)

// What one Anthropic request's strict tools may hold together.
const (
	AnthropicMaxStrictTools = 20
	AnthropicMaxOptional    = 24
	AnthropicMaxUnions      = 16
)

// Result is a tool's schema made strict for a dialect (Make).
type Result struct {
	// Schema is what the provider is sent: the rewritten schema when
	// Strict, else the schema as it was written.
	Schema json.RawMessage
	// Strict says the schema can go with strict: true; Reason says why
	// not when it cannot, naming the place in the schema.
	Strict bool
	Reason string
	// Optional and Unions count the optional properties and the
	// properties with anyOf or a list of types, for a request's limits
	// (Budget).
	Optional, Unions int
}

// emptyObject is the schema of a tool that declares no parameters.
var emptyObject = json.RawMessage(`{"type":"object","properties":{}}`)

// Make rewrites schema, a tool's parameters, into the subset d's strict
// mode takes, or says why it cannot (Result.Reason). An empty schema is
// a tool without parameters.
func Make(d Dialect, schema json.RawMessage) Result {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = emptyObject
	}
	root, err := decode(schema)
	if err != nil {
		return Result{Schema: schema, Reason: "the schema is not JSON"}
	}
	m := &maker{d: d}
	out, err := m.root(root)
	if err != nil {
		return Result{Schema: schema, Reason: err.Error()}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Result{Schema: schema, Reason: "the schema cannot be written back: " + err.Error()}
	}
	return Result{Schema: b, Strict: true, Optional: m.optional, Unions: m.unions}
}

// Check reports whether schema is in d's subset as it is written, with
// nothing to rewrite: a structured answer's schema, which the answer is
// checked against as written, goes strict only then.
func Check(d Dialect, schema json.RawMessage) error {
	r := Make(d, schema)
	if !r.Strict {
		return errors.New(r.Reason)
	}
	was, err := decode(schema)
	if err != nil {
		return err
	}
	is, err := decode(r.Schema)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(was, is) {
		return errors.New("strict mode takes it only rewritten (optional properties, additional properties allowed, or keywords it does not take)")
	}
	return nil
}

// decode reads JSON keeping numbers as they were written.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more follows the value")
	}
	return v, nil
}

// refusal is why a schema cannot be strict, at a JSON pointer into it.
type refusal struct{ at, why string }

func (r *refusal) Error() string {
	at := cmp.Or(r.at, "/")
	return "at " + at + ": " + r.why
}

func refuse(at, format string, args ...any) error {
	return &refusal{at: at, why: fmt.Sprintf(format, args...)}
}

// maker rewrites one schema, counting what the request limits bound.
type maker struct {
	d                       Dialect
	props, optional, unions int
}

func (m *maker) root(s any) (any, error) {
	obj, ok := s.(map[string]any)
	if !ok {
		return nil, refuse("", "the schema is not a JSON object")
	}
	if obj["type"] != "object" {
		return nil, refuse("", `the root's type is not "object"`)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, ok := obj[k]; ok {
			return nil, refuse("", "%s at the root, which strict mode does not take", k)
		}
	}
	if m.d == Anthropic {
		if err := noRecursion(obj); err != nil {
			return nil, err
		}
	}
	return m.node(obj, "", 0)
}

// node rewrites one schema of the tree (the root's or a subschema).
func (m *maker) node(s any, at string, depth int) (map[string]any, error) {
	if depth > MaxDepth {
		return nil, refuse(at, "nested more than %d levels deep", MaxDepth)
	}
	obj, ok := s.(map[string]any)
	if !ok {
		return nil, refuse(at, "a schema that is true or false")
	}
	if _, ok := obj["anyOf"]; ok {
		if _, ok := obj["oneOf"]; ok {
			return nil, refuse(at, "both anyOf and oneOf")
		}
	}
	out := map[string]any{}
	var notes []string
	for _, k := range sortedKeys(obj) {
		note, err := m.keyword(out, k, obj[k], at, depth)
		if err != nil {
			return nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if err := m.shape(out, at); err != nil {
		return nil, err
	}
	if len(notes) > 0 {
		out["description"] = describe(out["description"], notes)
	}
	return out, nil
}

// keyword takes one keyword of a schema into out: as it is, rewritten,
// or as a note for the description (returned); or refuses it.
func (m *maker) keyword(out map[string]any, k string, v any, at string, depth int) (string, error) {
	switch k {
	case "$schema", "$id", "$comment":
		// Nothing for the model.
	case "title", "description", "required", "additionalProperties", "type", "const", "pattern":
		out[k] = v
	case "enum":
		return "", m.enum(out, v, at)
	case "properties", "$defs", "definitions":
		subs, err := m.named(v, at+"/"+k, depth, k == "properties")
		if err != nil {
			return "", err
		}
		out[k] = subs
	case "items":
		if _, tuple := v.([]any); tuple {
			return "", refuse(at, "items as a list (a tuple), which strict mode does not take")
		}
		sub, err := m.node(v, at+"/items", depth+1)
		if err != nil {
			return "", err
		}
		out[k] = sub
	case "anyOf", "oneOf", "allOf":
		if k == "allOf" && m.d != Anthropic {
			return "", refuse(at, "allOf, which strict mode does not take")
		}
		subs, err := m.list(v, at+"/"+k, depth)
		if err != nil {
			return "", err
		}
		// oneOf's "exactly one" is anyOf's "at least one" for a model
		// writing one value; the tool checks the rest.
		out[strings.Replace(k, "oneOf", "anyOf", 1)] = subs
	case "$ref":
		ref, _ := v.(string)
		if ref != "#" && !strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
			return "", refuse(at, "a $ref outside the schema's $defs")
		}
		out[k] = v
	case "format":
		if f, _ := v.(string); formats[f] {
			out[k] = v
			return "", nil
		}
		return note(k, v), nil
	default:
		return m.bound(out, k, v, at)
	}
	return "", nil
}

// bound takes a keyword that narrows a value: kept where the dialect
// takes it, else a note; any other keyword is refused.
func (m *maker) bound(out map[string]any, k string, v any, at string) (string, error) {
	switch k {
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "maxItems":
		if m.d == OpenAI {
			out[k] = v
			return "", nil
		}
		return note(k, v), nil
	case "minItems":
		if n, _ := v.(json.Number); m.d == OpenAI || n == "0" || n == "1" {
			out[k] = v
			return "", nil
		}
		return note(k, v), nil
	case "minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties", "default", "examples",
		"deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding":
		return note(k, v), nil
	}
	return "", refuse(at, "keyword %s, which strict mode does not take", k)
}

func (m *maker) enum(out map[string]any, v any, at string) error {
	values, ok := v.([]any)
	if !ok || len(values) == 0 {
		return refuse(at, "an enum that is not a list of values")
	}
	if len(values) > MaxEnumValues {
		return refuse(at, "an enum of %d values; strict mode takes at most %d", len(values), MaxEnumValues)
	}
	for _, x := range values {
		switch x.(type) {
		case map[string]any, []any:
			if m.d == Anthropic {
				return refuse(at, "an enum with objects or lists, which Anthropic's strict mode does not take")
			}
		}
	}
	out["enum"] = v
	return nil
}

// named rewrites a map of subschemas (properties, $defs).
func (m *maker) named(v any, at string, depth int, properties bool) (map[string]any, error) {
	subs, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(at, "not a map of schemas")
	}
	out := make(map[string]any, len(subs))
	for _, name := range sortedKeys(subs) {
		if properties {
			if m.props++; m.props > MaxProperties {
				return nil, refuse(at, "more than %d properties", MaxProperties)
			}
		}
		sub, err := m.node(subs[name], at+"/"+pointerEscape(name), depth+1)
		if err != nil {
			return nil, err
		}
		out[name] = sub
	}
	return out, nil
}

// list rewrites a list of subschemas (anyOf, allOf).
func (m *maker) list(v any, at string, depth int) ([]any, error) {
	subs, ok := v.([]any)
	if !ok || len(subs) == 0 {
		return nil, refuse(at, "not a list of schemas")
	}
	out := make([]any, len(subs))
	for i, s := range subs {
		sub, err := m.node(s, fmt.Sprintf("%s/%d", at, i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = sub
	}
	return out, nil
}

// knownTypes are JSON Schema's types.
var knownTypes = map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "object": true, "array": true, "null": true}

// formats are the string formats strict mode takes (both dialects).
var formats = map[string]bool{"date-time": true, "time": true, "date": true, "duration": true, "email": true, "hostname": true,
	"ipv4": true, "ipv6": true, "uuid": true}

// shape checks what a rewritten schema says as a whole: its types, that
// it constrains its value at all, and an object's rules (closed, every
// property required or nullable by dialect).
func (m *maker) shape(out map[string]any, at string) error {
	types, err := typesOf(out["type"])
	if err != nil {
		return refuse(at, "%v", err)
	}
	for _, t := range types {
		if !knownTypes[t] {
			return refuse(at, "type %q", t)
		}
	}
	if len(types) > 1 || out["anyOf"] != nil {
		m.unions++
	}
	_, hasProps := out["properties"]
	if hasProps || slices.Contains(types, "object") {
		return m.object(out, at, hasProps)
	}
	if _, ok := out["required"]; ok {
		return refuse(at, "required outside an object")
	}
	if _, ok := out["additionalProperties"]; ok {
		return refuse(at, "additionalProperties outside an object")
	}
	for _, k := range []string{"type", "enum", "const", "anyOf", "allOf", "$ref"} {
		if _, ok := out[k]; ok {
			return nil
		}
	}
	return refuse(at, "a value of any type, which strict mode cannot describe")
}

// object closes an object and makes its optional properties what the
// dialect wants: required and nullable (OpenAI), or counted (Anthropic).
func (m *maker) object(out map[string]any, at string, hasProps bool) error {
	if !hasProps {
		return refuse(at, "an object without declared properties (a free-form map), which strict mode cannot describe")
	}
	switch out["additionalProperties"] {
	case nil:
		out["additionalProperties"] = false
	case false:
	default:
		return refuse(at, "an object that allows properties it does not declare")
	}
	props := out["properties"].(map[string]any)
	required, err := names(out["required"])
	if err != nil {
		return refuse(at, "required: %v", err)
	}
	var optional []string
	for _, name := range sortedKeys(props) {
		if !slices.Contains(required, name) {
			optional = append(optional, name)
		}
	}
	for _, r := range required {
		if _, ok := props[r]; !ok {
			return refuse(at, "required property %q is not declared", r)
		}
	}
	if m.d == Anthropic {
		m.optional += len(optional)
		return nil
	}
	for _, name := range optional {
		props[name] = nullable(props[name].(map[string]any))
	}
	out["required"] = append(append([]string{}, required...), optional...)
	return nil
}

// nullable is s that also takes null: its type with "null" (and null
// among its enum), or anyOf s and null.
func nullable(s map[string]any) map[string]any {
	if allowsNull(s, nil) {
		return s
	}
	_, hasConst := s["const"]
	if t, ok := s["type"]; ok && !hasConst && s["$ref"] == nil && s["anyOf"] == nil && s["allOf"] == nil {
		types, _ := typesOf(t)
		c := maps.Clone(s)
		list := make([]any, 0, len(types)+1)
		for _, t := range types {
			list = append(list, t)
		}
		c["type"] = append(list, "null")
		if enum, ok := c["enum"].([]any); ok {
			c["enum"] = append(slices.Clone(enum), nil)
		}
		return c
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// allowsNull reports whether schema s lets a value be null; resolve
// follows a $ref (nil: a $ref is taken not to).
func allowsNull(s any, resolve func(any) any) bool {
	if resolve != nil {
		s = resolve(s)
	}
	obj, ok := s.(map[string]any)
	if !ok {
		return s != false
	}
	if types, _ := typesOf(obj["type"]); slices.Contains(types, "null") {
		return true
	}
	if enum, ok := obj["enum"].([]any); ok && slices.Contains(enum, nil) {
		return true
	}
	if c, ok := obj["const"]; ok && c == nil {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := obj[k].([]any); ok {
			for _, sub := range list {
				if allowsNull(sub, resolve) {
					return true
				}
			}
		}
	}
	for _, k := range []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not"} {
		if _, ok := obj[k]; ok {
			return false
		}
	}
	return true // a value of any type
}

func typesOf(t any) ([]string, error) {
	switch v := t.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		if out, err := names(v); err == nil {
			return out, nil
		}
		return nil, errors.New("a type that is not a name")
	}
	return nil, errors.New("a type that is neither a name nor a list of names")
}

func names(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		if s, ok := v.([]string); ok {
			return s, nil
		}
		return nil, errors.New("not a list of names")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, errors.New("not a list of names")
		}
		out = append(out, s)
	}
	return out, nil
}

// note says a keyword the dialect does not take, for the description.
func note(k string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return k
	}
	return k + ": " + string(b)
}

func describe(desc any, notes []string) string {
	d, _ := desc.(string)
	n := strings.Join(notes, ", ")
	if d == "" {
		return n
	}
	return d + " (" + n + ")"
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// pointerEscape escapes a name for a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
