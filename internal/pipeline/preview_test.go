package pipeline

import "github.com/agentflow/agentflow/internal/words"

// The test helpers below show a result the way a caller would, and build
// values from Go data.

// Preview is what the model is shown of a result: its shape and its
// first rows, small enough for a prompt.
type Preview struct {
	Kind   Kind     `json:"kind"`
	Rows   int      `json:"rows"`
	Schema []Column `json:"schema,omitempty"`
	// Head holds a table's first rows.
	Head []map[string]any `json:"head,omitempty"`
	// Document is a document with its arrays cut to their first elements.
	Document any `json:"document,omitempty"`
	// Truncated says the preview leaves rows, elements or text out.
	Truncated bool     `json:"truncated"`
	Warnings  []string `json:"warnings,omitempty"`
}

// previewString is the longest string a preview shows in full.
const previewString = 200

// Preview returns the schema, the row count and the first n rows (n < 1
// shows none), or a document with its arrays cut to n elements; strings
// longer than 200 bytes are cut too.
func (r Result) Preview(n int) Preview {
	n = max(n, 0)
	p := Preview{Kind: r.Value.Kind, Rows: r.Rows, Schema: r.Schema, Warnings: r.Warnings}
	cut := false
	if r.Value.Kind == KindTable {
		head := r.Value.Table[:min(n, len(r.Value.Table))]
		p.Head = make([]map[string]any, len(head))
		for i, row := range head {
			p.Head[i] = truncate(row, n, &cut).(map[string]any)
		}
		p.Truncated = cut || len(r.Value.Table) > n
		return p
	}
	p.Document = truncate(r.Value.Doc, n, &cut)
	p.Truncated = cut
	return p
}

// truncate returns v with arrays cut to n elements and long strings cut,
// setting *cut when it cuts; it copies what it changes.
func truncate(v any, n int, cut *bool) any {
	switch x := v.(type) {
	case string:
		if len(x) > previewString {
			*cut = true
			return words.Clip(x, previewString)
		}
	case []any:
		if len(x) > n {
			*cut = true
			x = x[:n]
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = truncate(e, n, cut)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = truncate(e, n, cut)
		}
		return out
	}
	return v
}

// ValueOf returns v, a JSON value as encoding/json decodes it (or with
// int, *big.Int or []map[string]any parts), as a Value: a table when it is
// an array of objects, a document otherwise. NaN becomes null and ±Inf the
// largest finite numbers, as in jq; other Go types are an error.
func ValueOf(v any) (Value, error) {
	if rows, ok := v.([]map[string]any); ok {
		v = mapsToAny(rows)
	}
	v, err := normalize(v, 0)
	if err != nil {
		return Value{}, err
	}
	return classify(v), nil
}
