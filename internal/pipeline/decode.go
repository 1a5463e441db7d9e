package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// Bounds on what a call may say. They keep a call small enough to check
// and run quickly; a model needing more is doing something the tool is
// not for.
const (
	maxSteps        = 32
	maxQueryBytes   = 4096
	maxPatternBytes = 1024
	maxPatternInst  = 2000 // compiled instructions; matching time grows with them
	maxFormatBytes  = 128
	maxNameBytes    = 256 // field names and refs
	maxURLBytes     = 8192
	maxFieldsCount  = 256 // fields of table_select, by of groupby
)

// opSpec lists the fields a step kind takes besides "step".
type opSpec struct {
	required []string
	optional []string
}

func (s opSpec) allows(name string) bool {
	return slices.Contains(s.required, name) || slices.Contains(s.optional, name)
}

func (s opSpec) names() string {
	all := append(slices.Clone(s.required), s.optional...)
	return strings.Join(all, ", ")
}

var specs = map[Op]opSpec{
	OpHTTPRequest:  {required: []string{"url"}, optional: []string{"method", "params", "response_as", "body_ref"}},
	OpTableSort:    {required: []string{"field"}, optional: []string{"order"}},
	OpTableFilter:  {required: []string{"condition"}},
	OpTableSelect:  {required: []string{"fields"}},
	OpTopK:         {required: []string{"k"}},
	OpGroupBy:      {required: []string{"agg"}, optional: []string{"by", "field"}},
	OpJoin:         {required: []string{"right", "on"}, optional: []string{"left", "how"}},
	OpJQTransform:  {required: []string{"query"}},
	OpRegexExtract: {required: []string{"field", "pattern"}},
	OpParseDate:    {required: []string{"field", "format"}},
}

// wants says what each step field takes, for messages.
var wants = map[string]string{
	"url":         "an absolute http:// or https:// URL",
	"method":      `"GET" or "POST"`,
	"params":      "an object",
	"response_as": `"data" or "file"`,
	"body_ref":    "a ref of a stored file (cas://…) or previous_results[i]",
	"field":       "a field name",
	"order":       `"asc" or "desc"`,
	"condition":   `an object {"field": ..., "op": ..., "value": ...}`,
	"fields":      "an array of field names",
	"k":           "an integer ≥ 1",
	"by":          "an array of field names",
	"agg":         "one of count sum avg min max",
	"left":        "a ref",
	"right":       "a ref",
	"on":          "a field name",
	"how":         `"inner" or "left"`,
	"query":       "a jq query",
	"pattern":     "a regular expression (Go RE2 syntax)",
	"format":      "a strftime format such as %Y-%m-%d",
}

// Condition operators.
var condOps = []string{"=", "!=", "<", "<=", ">", ">=", "in", "contains"}

var aggs = []string{"count", "sum", "avg", "min", "max"}

// Decode reads an execute_pipeline call strictly: unknown fields, fields a
// step does not take, wrong types and bad values are errors that name the
// step and say what to change. It fills in defaults (method GET, order asc,
// how inner) and compiles queries and patterns to check them.
func Decode(raw []byte) (Pipeline, error) {
	top, err := object(raw)
	if err != nil {
		return Pipeline{}, invalidf(`arguments: want a JSON object {"session_id": ..., "pipeline": [...]}, got %s`, describeRaw(raw))
	}
	for _, k := range sortedKeys(top) {
		if k != "session_id" && k != "pipeline" && k != "input_ref" {
			return Pipeline{}, invalidf("unknown field %q; the arguments are session_id, pipeline and input_ref", k)
		}
	}
	var p Pipeline
	sid, ok := top["session_id"]
	if !ok {
		return Pipeline{}, invalidf("missing \"session_id\": want a string")
	}
	if err := decodeInto(sid, &p.SessionID); err != nil || isNull(sid) {
		return Pipeline{}, invalidf("session_id: want a string, got %s", describeRaw(sid))
	}
	if ref, ok := top["input_ref"]; ok {
		if err := decodeInto(ref, &p.InputRef); err != nil || isNull(ref) || p.InputRef == "" {
			return Pipeline{}, invalidf("input_ref: want a ref (a non-empty string), got %s", describeRaw(ref))
		}
	}
	rawSteps, ok := top["pipeline"]
	if !ok {
		return Pipeline{}, invalidf(`missing "pipeline": want an array of steps such as [{"step": "http_request", "url": "https://..."}]`)
	}
	var items []json.RawMessage
	if err := decodeInto(rawSteps, &items); err != nil || isNull(rawSteps) {
		return Pipeline{}, invalidf("pipeline: want an array of steps, got %s", describeRaw(rawSteps))
	}
	if len(items) == 0 {
		return Pipeline{}, invalidf("pipeline is empty; give at least one step")
	}
	if len(items) > maxSteps {
		return Pipeline{}, invalidf("pipeline has %d steps; the limit is %d", len(items), maxSteps)
	}
	for i, item := range items {
		s, err := decodeStep(item)
		if err != nil {
			return Pipeline{}, &StepError{Index: i, Op: s.Op, Err: err}
		}
		p.Steps = append(p.Steps, s)
	}
	p = p.withDefaults()
	if _, err := compile(p); err != nil {
		return Pipeline{}, err
	}
	return p, nil
}

// decodeStep reads one step. On error the returned Step has its Op when
// that much could be read.
func decodeStep(raw json.RawMessage) (Step, error) {
	var s Step
	fields, err := object(raw)
	if err != nil {
		return s, invalidf(`want an object such as {"step": "top_k", "k": 3}, got %s`, describeRaw(raw))
	}
	opRaw, ok := fields["step"]
	if !ok {
		return s, invalidf(`missing "step": want one of %s`, opList())
	}
	var op string
	if err := decodeInto(opRaw, &op); err != nil || isNull(opRaw) {
		return s, invalidf("step: want one of %s, got %s", opList(), describeRaw(opRaw))
	}
	spec, ok := specs[Op(op)]
	if !ok {
		return s, invalidf("step %q: want one of %s", op, opList())
	}
	s.Op = Op(op)
	for _, k := range sortedKeys(fields) {
		if k != "step" && !spec.allows(k) {
			return s, unknownField(s.Op, k)
		}
	}
	for _, k := range spec.required {
		if _, ok := fields[k]; !ok {
			return s, invalidf("missing %q: want %s", k, wants[k])
		}
	}
	for _, k := range sortedKeys(fields) {
		if k == "step" {
			continue
		}
		if err := decodeField(&s, k, fields[k]); err != nil {
			return s, err
		}
	}
	return s, nil
}

func unknownField(op Op, name string) error {
	return invalidf("unknown field %q; %s takes %s", name, op, specs[op].names())
}

// decodeField reads one field of a step into s.
func decodeField(s *Step, name string, raw json.RawMessage) error {
	if name == "condition" {
		c, err := decodeCondition(raw)
		if err != nil {
			return err
		}
		s.Condition = c
		return nil
	}
	var target any
	switch name {
	case "url":
		target = &s.URL
	case "method":
		target = &s.Method
	case "params":
		target = &s.Params
	case "response_as":
		target = &s.ResponseAs
	case "body_ref":
		target = &s.BodyRef
	case "field":
		target = &s.Field
	case "order":
		target = &s.Order
	case "fields":
		target = &s.Fields
	case "k":
		target = &s.K
	case "by":
		target = &s.By
	case "agg":
		target = &s.Agg
	case "left":
		target = &s.Left
	case "right":
		target = &s.Right
	case "on":
		target = &s.On
	case "how":
		target = &s.How
	case "query":
		target = &s.Query
	case "pattern":
		target = &s.Pattern
	case "format":
		target = &s.Format
	default:
		return unknownField(s.Op, name)
	}
	if isNull(raw) || decodeInto(raw, target) != nil || hasNullItem(name, raw) || emptyText(name, target) {
		return invalidf("%s: want %s, got %s", name, wants[name], describeRaw(raw))
	}
	return nil
}

// emptyText reports an empty string where a step field would otherwise
// read as absent.
func emptyText(name string, target any) bool {
	p, ok := target.(*string)
	return ok && *p == "" && (name == "body_ref" || name == "response_as")
}

// hasNullItem reports a null in an array of names, which encoding/json
// would read as "".
func hasNullItem(name string, raw json.RawMessage) bool {
	if name != "fields" && name != "by" {
		return false
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return false
	}
	return slices.ContainsFunc(items, isNull)
}

func decodeCondition(raw json.RawMessage) (*Condition, error) {
	fields, err := object(raw)
	if err != nil {
		return nil, invalidf("condition: want %s, got %s", wants["condition"], describeRaw(raw))
	}
	for _, k := range sortedKeys(fields) {
		if k != "field" && k != "op" && k != "value" {
			return nil, invalidf("condition: unknown field %q; a condition has field, op and value", k)
		}
	}
	var c Condition
	for _, k := range []string{"field", "op", "value"} {
		if _, ok := fields[k]; !ok {
			hint := ""
			if k == "value" {
				hint = " (null matches null and missing values)"
			}
			return nil, invalidf("condition: missing %q%s", k, hint)
		}
	}
	if f := fields["field"]; isNull(f) || decodeInto(f, &c.Field) != nil {
		return nil, invalidf("condition.field: want a field name, got %s", describeRaw(f))
	}
	if o := fields["op"]; isNull(o) || decodeInto(o, &c.Op) != nil {
		return nil, invalidf("condition.op: want one of %s, got %s", strings.Join(condOps, " "), describeRaw(o))
	}
	if err := decodeInto(fields["value"], &c.Value); err != nil {
		return nil, invalidf("condition.value: %v", err)
	}
	return &c, nil
}

// object reads raw as one JSON object, keeping its fields raw.
func object(raw []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := decodeInto(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null")
	}
	return m, nil
}

// decodeInto decodes exactly one JSON value, numbers as json.Number.
func decodeInto(raw []byte, target any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(target); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// describeRaw writes raw JSON for a message, compact and short.
func describeRaw(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return words.Clip(strings.TrimSpace(string(raw)), 60)
	}
	s := buf.String()
	switch {
	case strings.HasPrefix(s, "{"):
		return "an object " + words.Clip(s, 60)
	case strings.HasPrefix(s, "["):
		return "an array " + words.Clip(s, 60)
	}
	return words.Clip(s, 60)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func opList() string {
	names := make([]string, 0, len(specs))
	for _, op := range Ops() {
		names = append(names, string(op))
	}
	return strings.Join(names, " ")
}
