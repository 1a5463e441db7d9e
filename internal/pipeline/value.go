package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// Kind says what a Value holds.
type Kind string

const (
	// KindTable is an array of objects, each a row.
	KindTable Kind = "table"
	// KindDocument is any other JSON value.
	KindDocument Kind = "document"
)

// Value is the data flowing between steps: a table or a JSON document.
// Its JSON values are those encoding/json decodes into an any (numbers
// as json.Number or float64; int and *big.Int, which jq yields, too).
// Steps never change a Value they are given: a step that changes rows
// copies them, so a caller may cache what Env.Load returns.
type Value struct {
	Kind  Kind
	Table []map[string]any // KindTable: the rows
	Doc   any              // KindDocument: the document
}

// TableOf returns a table of rows.
func TableOf(rows []map[string]any) Value {
	if rows == nil {
		rows = []map[string]any{}
	}
	return Value{Kind: KindTable, Table: rows}
}

// MarshalJSON encodes the table or the document.
func (v Value) MarshalJSON() ([]byte, error) {
	return json.Marshal(v.data())
}

// data returns the value as one JSON value.
func (v Value) data() any {
	if v.Kind == KindTable {
		if v.Table == nil {
			return []map[string]any{}
		}
		return v.Table
	}
	return v.Doc
}

// classify returns an array of objects as a table and anything else as a
// document.
func classify(v any) Value {
	if rows, ok := rowsOf(v); ok {
		return TableOf(rows)
	}
	return Value{Kind: KindDocument, Doc: v}
}

// rowsOf returns v's elements when v is an array of objects.
func rowsOf(v any) ([]map[string]any, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	rows := make([]map[string]any, len(arr))
	for i, el := range arr {
		m, ok := el.(map[string]any)
		if !ok || m == nil {
			return nil, false
		}
		rows[i] = m
	}
	return rows, true
}

func mapsToAny(rows []map[string]any) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}

// asTable returns the rows of a step's input, unwrapping an envelope
// object (see the package doc), or says why the input is not a table.
func asTable(v Value) ([]map[string]any, error) {
	if v.Kind == KindTable {
		return v.Table, nil
	}
	const need = "needs a table (an array of objects)"
	switch d := v.Doc.(type) {
	case map[string]any:
		var full, empty []string
		for k, f := range d {
			if rows, ok := rowsOf(f); ok {
				if len(rows) > 0 {
					full = append(full, k)
				} else {
					empty = append(empty, k)
				}
			}
		}
		switch {
		case len(full) == 1:
			rows, _ := rowsOf(d[full[0]])
			return rows, nil
		case len(full) == 0 && len(empty) == 1:
			return []map[string]any{}, nil
		case len(full) > 1:
			slices.Sort(full)
			return nil, invalidf("%s but the input is an object with several arrays of objects (%s); pick one with a jq_transform step such as {\"step\": \"jq_transform\", \"query\": \".%s\"}",
				need, strings.Join(full, ", "), full[0])
		}
		return nil, invalidf("%s but the input is an object with fields %s; reshape it with a jq_transform step (wrap a stream in [ ] to get an array)", need, fieldList(sortedKeys(d)))
	case []any:
		for i, el := range d {
			if m, ok := el.(map[string]any); !ok || m == nil {
				return nil, invalidf("%s but element %d of the input array is %s; reshape it with a jq_transform step, e.g. map({value: .})", need, i, describe(el))
			}
		}
		rows, _ := rowsOf(d)
		return rows, nil
	}
	return nil, invalidf("%s but the input is %s", need, describe(v.Doc))
}

// lookup returns the value of field in row: the field of that exact name
// or else, when the name has dots, the nested field it names.
func lookup(row map[string]any, field string) (any, bool) {
	if v, ok := row[field]; ok {
		return v, true
	}
	head, rest, ok := strings.Cut(field, ".")
	if !ok {
		return nil, false
	}
	child, ok := row[head].(map[string]any)
	if !ok {
		return nil, false
	}
	return lookup(child, rest)
}

// withField returns a copy of row with field (found as lookup finds it)
// set to v; nested objects on the way are copied too.
func withField(row map[string]any, field string, v any) map[string]any {
	out := cloneRow(row, 1)
	if _, ok := row[field]; ok {
		out[field] = v
		return out
	}
	if head, rest, ok := strings.Cut(field, "."); ok {
		if child, ok := row[head].(map[string]any); ok {
			out[head] = withField(child, rest, v)
			return out
		}
	}
	out[field] = v
	return out
}

// cloneRow copies row into a new map with room for extra fields.
func cloneRow(row map[string]any, extra int) map[string]any {
	out := make(map[string]any, len(row)+extra)
	maps.Copy(out, row)
	return out
}

// checkField says so when no row has field, listing the fields there are:
// a misspelt field would otherwise filter, sort or group silently wrong.
func checkField(rows []map[string]any, label, field string) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if _, ok := lookup(r, field); ok {
			return nil
		}
	}
	return invalidf("%s %q is in no row; the rows have %s", label, field, fieldList(fieldsOfAll(rows[:min(len(rows), 100)])))
}

// fieldList writes names for a message, at most 30 of them.
func fieldList(names []string) string {
	if len(names) == 0 {
		return "no fields"
	}
	if len(names) > 30 {
		return strings.Join(names[:30], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	return strings.Join(names, ", ")
}

// text returns v as text for matching (strings and numbers); ok is false
// for other values.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return string(x), true
	case bool:
		return "", false
	}
	if n, ok := toNumber(v); ok {
		return n.String(), true
	}
	return "", false
}

// jsonType names v's JSON type.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "object"
	}
	if _, ok := toNumber(v); ok {
		return "number"
	}
	if f, ok := v.(float64); ok && math.IsNaN(f) {
		return "number"
	}
	return "unknown"
}

// describe writes a value for a message: short JSON, cut at 60 bytes.
func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object " + words.Clip(marshal(v), 60)
	case []any:
		return "an array " + words.Clip(marshal(v), 60)
	case nil:
		return "null"
	}
	return words.Clip(marshal(v), 60)
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// maxDepth bounds the nesting of values the engine accepts; encoding/json
// reads 10000 levels, but nothing a model needs is this deep, and the walks
// below recurse.
const maxDepth = 512

// sizeOf returns the approximate JSON size of v (strings are counted
// without escapes), stopping with an error as soon as it passes limit.
func sizeOf(v any, limit int) (int, error) {
	s := sizer{limit: limit}
	if err := s.walk(v, 0); err != nil {
		return s.n, err
	}
	return s.n, nil
}

type sizer struct {
	n, limit int
}

func (s *sizer) walk(v any, depth int) error {
	if depth > maxDepth {
		return invalidf("output is nested more than %d levels deep", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		s.n += 4
	case bool:
		s.n += 5
	case string:
		s.n += len(x) + 2
	case json.Number:
		s.n += len(x)
	case float64, float32, int, int64:
		s.n += 8
	case *big.Int:
		s.n += x.BitLen()/3 + 2
	case []any:
		s.n += 1 + len(x)
		for _, e := range x {
			if err := s.walk(e, depth+1); err != nil {
				return err
			}
		}
	case []map[string]any:
		s.n += 1 + len(x)
		for _, e := range x {
			if err := s.walk(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		s.n += 1 + len(x)
		for k, e := range x {
			s.n += len(k) + 3
			if err := s.walk(e, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	if s.n > s.limit {
		return errTooLarge
	}
	return nil
}

// errTooLarge is sizeOf's error for a value over its limit.
var errTooLarge = errors.New("value is over the size limit")

// tooLarge is the message for a value over MaxBytes.
func tooLarge(what string, limit int) error {
	return invalidf("%s is over the limit of %d bytes of JSON; narrow it: fewer rows or fields (table_filter, top_k, table_select, groupby) or a smaller request", what, limit)
}

// normalize returns v with NaN as null and ±Inf as ±MaxFloat64 (as jq
// writes them), so that it encodes as JSON, and checks its types and
// depth. It copies only the arrays and objects it changes.
func normalize(v any, depth int) (any, error) {
	n, _, err := normalizeValue(v, depth)
	return n, err
}

// normalizeValue is normalize; changed says whether the result differs
// from v.
func normalizeValue(v any, depth int) (out any, changed bool, err error) {
	if depth > maxDepth {
		return nil, false, invalidf("value is nested more than %d levels deep", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, json.Number, int, int64, *big.Int:
		return v, false, nil
	case float32:
		n, _, err := normalizeValue(float64(x), depth)
		return n, true, err
	case float64:
		switch {
		case math.IsNaN(x):
			return nil, true, nil
		case math.IsInf(x, 1):
			return math.MaxFloat64, true, nil
		case math.IsInf(x, -1):
			return -math.MaxFloat64, true, nil
		}
		return x, false, nil
	case []map[string]any:
		n, _, err := normalizeValue(mapsToAny(x), depth)
		return n, true, err
	case []any:
		var out []any
		for i, e := range x {
			n, changed, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = slices.Clone(x)
			}
			if out != nil {
				out[i] = n
			}
		}
		if out == nil {
			return x, false, nil
		}
		return out, true, nil
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			n, changed, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = cloneRow(x, 0)
			}
			if out != nil {
				out[k] = n
			}
		}
		if out == nil {
			return x, false, nil
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("unsupported value type %T", v)
}
