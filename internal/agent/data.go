package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/words"
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
	// FieldsOmitted counts the fields left out of Fields to keep the
	// preview small (MaxFieldsBytes).
	FieldsOmitted int `json:"fields_omitted,omitempty"`
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

// Bounds of a preview. A preview travels in workflow history, events and
// what the model reads, so it is small whatever the data: rows and field
// names of any size are cut to fit, never kept whole.
const (
	// MaxSampleBytes bounds a preview's sample, as a JSON array.
	MaxSampleBytes = 2048
	// MaxFieldsBytes bounds a preview's fields, as JSON.
	MaxFieldsBytes = 2048
	// maxFieldName bounds one field's name in a preview.
	maxFieldName = 64
)

// SampleRows is how many rows of a dataset a preview shows.
const SampleRows = 3

// Bounded returns p with its sample and fields within their bounds
// (CapSample, CapFields): what a preview from anywhere, a tool's own
// included, may carry.
func (p DataPreview) Bounded() DataPreview {
	p.Sample = CapSample(p.Sample)
	var omitted int
	p.Fields, omitted = CapFields(p.Fields)
	p.FieldsOmitted += omitted
	return p
}

// CapFields keeps the leading fields that fit in MaxFieldsBytes, names
// and types cut to 64 bytes, and says how many it left out.
func CapFields(fields []Field) ([]Field, int) {
	var out []Field
	size := 2 // the array's brackets
	for i, f := range fields {
		f.Name, f.Type = words.Clip(f.Name, maxFieldName), words.Clip(f.Type, maxFieldName)
		b, _ := json.Marshal(f) // a struct of strings
		if size+len(b)+1 > MaxFieldsBytes {
			return out, len(fields) - i
		}
		size += len(b) + 1
		out = append(out, f)
	}
	return out, 0
}

// minCutRow is the least room a row is cut into: with less, the sample
// shows fewer rows instead.
const minCutRow = 512

// CapSample returns the leading rows of a sample that fit in
// MaxSampleBytes as a JSON array. It shows as many rows as it can while
// each row it has to cut keeps at least 512 bytes: rows that fit stay
// whole, and the room left is shared by the rows that do not, each cut
// to its share (CutRow). A row that is not valid JSON, or not valid
// UTF-8, is never kept as it is.
func CapSample(rows []json.RawMessage) []json.RawMessage {
	sizes := make([]int, len(rows))
	for i, r := range rows {
		sizes[i] = len(r)
		if !json.Valid(r) || !utf8.Valid(r) {
			sizes[i] = math.MaxInt // cut whatever its size
		}
	}
	for k := len(rows); k > 0; k-- {
		share, ok := shares(sizes[:k])
		if !ok && k > 1 {
			continue
		}
		out := make([]json.RawMessage, k)
		for i, r := range rows[:k] {
			if sizes[i] <= share {
				out[i] = r
			} else {
				out[i] = CutRow(r, share)
			}
		}
		return out
	}
	return nil
}

// shares shares the sample's room among rows of the given sizes: rows
// that fit their share stay whole, and the others are cut to what is
// left, each the same share. ok is false when that share is under
// minCutRow.
func shares(sizes []int) (share int, ok bool) {
	room := MaxSampleBytes - 2 - (len(sizes) - 1) // brackets and commas
	sorted := slices.Sorted(slices.Values(sizes))
	for i, s := range sorted {
		share = room / (len(sorted) - i)
		if s > share {
			return share, share >= minCutRow
		}
		room -= s
	}
	return math.MaxInt, true // all fit: no row is cut
}

// cutKey is the field under which a cut row says it was cut.
const cutKey = "_cut"

// CutRow returns a row (a JSON value, usually an object) as a JSON
// object of at most limit bytes that says it was cut: its fields in their
// order, long strings clipped, nested objects and arrays over a few
// bytes summarized, numbers of many digits described, and the fields that
// still do not fit left out. A value that is not a JSON object is the
// field "value"; what is not valid JSON is only described. limit must
// leave room for the note (minCutRow does).
func CutRow(row json.RawMessage, limit int) json.RawMessage {
	fields, ok := objectFields(row)
	if !ok {
		if !json.Valid(row) {
			return noteOnly(fmt.Sprintf("the row is not valid JSON (%s)", FormatBytes(len(row))))
		}
		fields = []rowField{{key: "value", raw: bytes.TrimSpace(row)}}
	}
	keys := map[string]bool{}
	for _, f := range fields {
		keys[f.key] = true
	}
	key := cutKey
	for i := 2; keys[key]; i++ {
		key = fmt.Sprintf("%s%d", cutKey, i) // the note's field is the row's own
	}
	c := cutRow{key: key}
	levels := []int{200, 64, 16}
	if len(row) <= limit {
		// It fits, but is not valid UTF-8: re-encoded, it is.
		levels = append([]int{math.MaxInt}, levels...)
	}
	var enc [][]byte
	for _, n := range levels {
		c.what = fmt.Sprintf("the row is %s; it was cut to fit the preview: long strings clipped, nested values summarized", FormatBytes(len(row)))
		if n == math.MaxInt {
			c.what = "the row was not valid UTF-8; its invalid bytes were replaced"
		}
		enc = enc[:0]
		size := len(c.note(0, 0)) + 2
		for _, f := range fields {
			b := append(append(encode(words.Clip(f.key, maxFieldName)), ':'), cutValue(f.raw, n)...)
			enc = append(enc, b)
			size += len(b) + 1
		}
		if size <= limit {
			return c.join(enc, len(enc))
		}
	}
	// Even short, the fields do not all fit: keep the leading ones.
	size := len(c.note(len(enc), len(enc))) + 2 // the longest note
	kept := 0
	for _, b := range enc {
		if size+len(b)+1 > limit {
			break
		}
		size += len(b) + 1
		kept++
	}
	return c.join(enc, kept)
}

// cutRow writes a cut row: the note first, then the fields kept.
type cutRow struct {
	key  string // the note's field
	what string // what the note says
}

// note is the note's field, saying how many of n fields were left out.
func (c cutRow) note(left, n int) []byte {
	what := c.what
	if left > 0 {
		what = fmt.Sprintf("%s; %d of %d fields left out", what, left, n)
	}
	return append(append(encode(c.key), ':'), encode(what)...)
}

// join is the row of the note and the first kept of the encoded fields.
func (c cutRow) join(enc [][]byte, kept int) json.RawMessage {
	var out bytes.Buffer
	out.WriteByte('{')
	out.Write(c.note(len(enc)-kept, len(enc)))
	for _, b := range enc[:kept] {
		out.WriteByte(',')
		out.Write(b)
	}
	out.WriteByte('}')
	return out.Bytes()
}

// noteOnly is a cut row that only says what the row was.
func noteOnly(what string) json.RawMessage {
	return cutRow{key: cutKey, what: what}.join(nil, 0)
}

// rowField is one field of a row, in the row's order.
type rowField struct {
	key string
	raw json.RawMessage
}

// objectFields returns the fields of a JSON object in their order, and
// false for anything else.
func objectFields(row json.RawMessage) ([]rowField, bool) {
	dec := json.NewDecoder(bytes.NewReader(row))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var fields []rowField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		fields = append(fields, rowField{key: t.(string), raw: raw}) // a key is a string
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // something after the object
	}
	return fields, true
}

// cutValue is a field's value as a cut row shows it, as JSON: strings
// clipped to n bytes, objects and arrays over n bytes summarized, numbers
// of more than 32 characters described.
func cutValue(raw json.RawMessage, n int) []byte {
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s) // valid JSON; invalid UTF-8 becomes U+FFFD
		return encode(words.Clip(s, n))
	case '{', '[':
		if len(raw) <= n && utf8.Valid(raw) {
			var b bytes.Buffer
			_ = json.Compact(&b, raw) // valid JSON
			return b.Bytes()
		}
		return encode(summary(raw))
	case 't', 'f', 'n':
		return raw
	}
	if len(raw) <= 32 {
		return raw
	}
	return encode(fmt.Sprintf("(a number of %d characters)", len(raw)))
}

// summary describes a JSON object or array by its size.
func summary(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	open, _ := dec.Token() // valid JSON
	n := 0
	for dec.More() {
		if open == json.Delim('{') {
			if _, err := dec.Token(); err != nil {
				break
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			break
		}
		n++
	}
	if open == json.Delim('{') {
		return fmt.Sprintf("(an object of %s, %s)", words.Count(n, "field"), FormatBytes(len(raw)))
	}
	return fmt.Sprintf("(an array of %s, %s)", words.Count(n, "item"), FormatBytes(len(raw)))
}

// plural is "1 field", "2 fields".
// encode is v as JSON, without HTML escapes.
func encode(v any) []byte {
	b, _ := MarshalPlain(v) // strings and numbers
	return b
}

// MarshalPlain is v as JSON without HTML escapes, its strings as a person
// or a model wrote them ("price < 500", not "price \u003c 500").
func MarshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalNumbers decodes the JSON value that b begins with, its numbers
// as json.Number: as they were written, not rounded through float64.
func UnmarshalNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// FormatBytes writes a size for people: "812 bytes", "2 KiB", "9.4 MiB".
func FormatBytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return unit(n, 1<<10, "KiB")
	}
	return unit(n, 1<<20, "MiB")
}

func unit(n, size int, name string) string {
	if n%size == 0 {
		return fmt.Sprintf("%d %s", n/size, name)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(size), name)
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
		for _, name := range slices.Sorted(maps.Keys(row)) {
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
	return p.Bounded(), nil
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
