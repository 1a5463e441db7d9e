package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Data kinds of a DataPreview.
const (
	DataDataset  = "dataset"  // a table: a JSON array of objects
	DataDocument = "document" // any other JSON value
	DataText     = "text"     // a text answer
)

// DataPreview describes data kept by reference: what a model or a caller
// sees of it without reading it all. It is a turn's result_preview and
// what tool_end events and the model get for a tool's data.
type DataPreview struct {
	Type     string            `json:"type"`
	Ref      string            `json:"ref,omitempty"`
	RowCount int               `json:"row_count,omitempty"`
	Fields   []Field           `json:"fields,omitempty"`
	Sample   []json.RawMessage `json:"sample,omitempty"`
	Bytes    int               `json:"bytes,omitempty"`
}

// Field is a field of a dataset's rows and the JSON types seen in it.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"` // string | number | boolean | object | array | null, or several joined by "|"
}

// Ref schemes.
const (
	CASRefPrefix      = "cas://sha256:"
	ArtifactRefPrefix = "artifact://"
)

// IsRef reports whether s has the form of a data or result ref.
func IsRef(s string) bool {
	return strings.HasPrefix(s, CASRefPrefix) || strings.HasPrefix(s, ArtifactRefPrefix)
}

// maxSampleBytes bounds a preview's sample: it travels in workflow
// history and events.
const maxSampleBytes = 2048

// SampleRows is how many rows of a dataset a preview shows.
const SampleRows = 3

// CapSample keeps the leading rows of a sample that a preview may carry:
// rows are added while the sample is under 2 KiB.
func CapSample(rows []json.RawMessage) []json.RawMessage {
	size := 0
	for i, r := range rows {
		if size >= maxSampleBytes {
			return rows[:i]
		}
		size += len(r)
	}
	return rows
}

// PreviewOf describes JSON data: a dataset (an array of objects) by its
// row count, fields and first sampleRows rows; anything else as a
// document. ref is where the data is kept, if anywhere.
func PreviewOf(data json.RawMessage, ref string, sampleRows int) (DataPreview, error) {
	p := DataPreview{Type: DataDocument, Ref: ref, Bytes: len(data)}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(data, &rows); err != nil {
		if !json.Valid(data) {
			return DataPreview{}, Errorf(CodeInvalid, "data is not valid JSON")
		}
		return p, nil // not an array of objects: a document
	}
	p.Type, p.RowCount = DataDataset, len(rows)
	types := map[string]map[string]bool{}
	var order []string
	for i, row := range rows {
		if row == nil {
			return DataPreview{Type: DataDocument, Ref: ref, Bytes: len(data)}, nil // an array with nulls: a document
		}
		for _, name := range sortedKeys(row) {
			if types[name] == nil {
				types[name] = map[string]bool{}
				order = append(order, name)
			}
			types[name][jsonType(row[name])] = true
		}
		if i < sampleRows {
			b, _ := json.Marshal(row) // re-encoding decoded JSON cannot fail
			p.Sample = append(p.Sample, b)
		}
	}
	for _, name := range order {
		var ts []string
		for _, t := range []string{"string", "number", "boolean", "object", "array", "null"} {
			if types[name][t] {
				ts = append(ts, t)
			}
		}
		p.Fields = append(p.Fields, Field{Name: name, Type: strings.Join(ts, "|")})
	}
	p.Sample = CapSample(p.Sample)
	return p, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}

func jsonType(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	switch {
	case s == "" || s == "null":
		return "null"
	case s[0] == '"':
		return "string"
	case s[0] == '{':
		return "object"
	case s[0] == '[':
		return "array"
	case s == "true" || s == "false":
		return "boolean"
	}
	return "number"
}
