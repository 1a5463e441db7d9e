package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		contentType string
		url         string
		kind        Kind
		want        string
		err         string
	}{
		{name: "array of objects is a table", body: `[{"a": 1}, {"a": 2}]`, contentType: "application/json", kind: KindTable, want: `[{"a": 1}, {"a": 2}]`},
		{name: "empty array is a table", body: `[]`, kind: KindTable, want: `[]`},
		{name: "object is a document", body: `{"items": [{"a": 1}]}`, contentType: "application/json; charset=utf-8", kind: KindDocument, want: `{"items": [{"a": 1}]}`},
		{name: "mixed array is a document", body: `[{"a": 1}, 2]`, kind: KindDocument, want: `[{"a": 1}, 2]`},
		{name: "newline-delimited JSON", body: "{\"a\": 1}\n{\"a\": 2}\n", contentType: "application/x-ndjson", kind: KindTable, want: `[{"a": 1}, {"a": 2}]`},
		{name: "byte order mark", body: "\uFEFF[{\"a\": 1}]", kind: KindTable, want: `[{"a": 1}]`},
		{name: "empty body", body: "", err: "the body is empty"},
		{name: "HTML", body: "<html><body>Not here</body></html>", contentType: "text/html",
			err: "the body (text/html) is not JSON or CSV: invalid character '<' looking for beginning of value; it starts with: <html><body>Not here</body></html>"},

		{name: "CSV by content type, numbers by column", body: "id,name,zip,price,note\n1,Ann,02134,12.50,\n2,Bob,10001,7,x\n", contentType: "text/csv; charset=utf-8", kind: KindTable,
			want: `[{"id": 1, "name": "Ann", "zip": "02134", "price": 12.50, "note": null}, {"id": 2, "name": "Bob", "zip": "10001", "price": 7, "note": "x"}]`},
		{name: "CSV by URL when the type says neither", body: "a\n1\n", contentType: "text/plain", url: "https://x.example/data.CSV?x=1", kind: KindTable, want: `[{"a": 1}]`},
		{name: "CSV by URL without a type", body: "a\n1\n", url: "https://x.example/data.csv", kind: KindTable, want: `[{"a": 1}]`},
		{name: "JSON type wins over a .csv URL", body: `[{"a": 1}]`, contentType: "application/json", url: "https://x.example/data.csv", kind: KindTable, want: `[{"a": 1}]`},
		{name: "CSV column with text stays text", body: "v\n1\nabc\n", contentType: "text/csv", kind: KindTable, want: `[{"v": "1"}, {"v": "abc"}]`},
		{name: "CSV header names", body: "a,,a,a\n1,2,3,4\n", contentType: "text/csv", kind: KindTable, want: `[{"a": 1, "column_2": 2, "a_2": 3, "a_3": 4}]`},
		{name: "CSV short row", body: "a,b\n1\n", contentType: "text/csv", kind: KindTable, want: `[{"a": 1, "b": null}]`},
		{name: "CSV quoted", body: "a,b\n\"x, y\",\"say \"\"hi\"\"\"\n", contentType: "text/csv", kind: KindTable, want: `[{"a": "x, y", "b": "say \"hi\""}]`},
		{name: "CSV header only", body: "a,b\n", contentType: "text/csv", kind: KindTable, want: `[]`},
		{name: "CSV long row", body: "a,b\n1,2,3\n", contentType: "text/csv", err: "the CSV's row 1 has 3 cells but its header has 2"},
		{name: "CSV bad quotes", body: "a\n\"x\n", contentType: "text/csv", err: `the CSV is malformed: parse error on line 2, column 4: extraneous or missing " in quoted-field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Parse([]byte(tt.body), tt.contentType, tt.url)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.kind, v.Kind)
			got, err := json.Marshal(v)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
		})
	}
}

func TestValueOf(t *testing.T) {
	v, err := ValueOf([]map[string]any{{"a": 1.5}})
	require.NoError(t, err)
	require.Equal(t, KindTable, v.Kind)
	v, err = ValueOf(map[string]any{"a": []any{1, 2}})
	require.NoError(t, err)
	require.Equal(t, KindDocument, v.Kind)
	_, err = ValueOf(struct{}{})
	require.EqualError(t, err, "unsupported value type struct {}")
}
