package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Result is the outcome of a run.
type Result struct {
	// Value is the last step's output; encode it with json.Marshal to
	// store it.
	Value Value
	// Rows is the number of rows of a table, 0 for a document.
	Rows int
	// Schema lists a table's fields, sorted by name; nil for a document.
	Schema []Column
	// Warnings tell the model about data a step skipped or left as it was
	// (rows a filter could not compare, dates that did not parse, a pattern
	// that matched nothing).
	Warnings []string
	// Files are the responses the run kept as files (response_as
	// "file"), in the order it kept them.
	Files []File
}

// Column is a field of a table and the JSON types its values have.
type Column struct {
	Name string `json:"name"`
	// Types are the JSON types seen (string, number, boolean, object,
	// array, null) in that order; "missing" when some rows lack the field.
	Types []string `json:"types"`
}

// jsonTypes is the order of Column.Types.
var jsonTypes = []string{"string", "number", "boolean", "object", "array", "null", "missing"}

func newResult(v Value, warnings []string) Result {
	r := Result{Value: v, Warnings: warnings}
	if v.Kind != KindTable {
		return r
	}
	r.Rows = len(v.Table)
	seen := map[string]map[string]int{}
	for _, row := range v.Table {
		for k, x := range row {
			if seen[k] == nil {
				seen[k] = map[string]int{}
			}
			seen[k][jsonType(x)]++
		}
	}
	for _, name := range sortedKeys(seen) {
		c := Column{Name: name}
		total := 0
		for _, t := range jsonTypes {
			if n := seen[name][t]; n > 0 {
				c.Types = append(c.Types, t)
				total += n
			}
		}
		if total < len(v.Table) {
			c.Types = append(c.Types, "missing")
		}
		r.Schema = append(r.Schema, c)
	}
	return r
}

// keyVersion changes when the engine computes different results for the
// same pipeline, so that cached results of the old engine are not reused.
const keyVersion = "pipeline/v1"

// Key returns a stable hash (hex SHA-256) of p's canonical JSON: defaults
// filled in, session_id left out (it does not change the result), object
// keys sorted. Equal keys mean equal pipelines, not equal results: a
// pipeline that fetches over HTTP reads data that changes, so a cache
// keyed by it must expire (see the package doc).
func Key(p Pipeline) string {
	p = p.withDefaults()
	p.SessionID = ""
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Params != nil {
			s.Params = keyable(s.Params).(map[string]any)
		}
		if s.Condition != nil {
			c := *s.Condition
			c.Value = keyable(c.Value)
			s.Condition = &c
		}
	}
	b, _ := json.Marshal(p) // keyable values always encode
	h := sha256.New()
	h.Write([]byte(keyVersion + "\n"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// keyable returns v as a value json.Marshal encodes: normalized, or, for
// a value of a type no decoded JSON has (only a hand-built pipeline has
// one), its Go syntax as a string.
func keyable(v any) any {
	n, err := normalize(v, 0)
	if err != nil {
		if _, isMap := v.(map[string]any); isMap {
			m := map[string]any{}
			for k, e := range v.(map[string]any) {
				m[k] = keyable(e)
			}
			return m
		}
		return fmt.Sprintf("%T %#v", v, v)
	}
	return n
}
