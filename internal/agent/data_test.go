package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// row is a JSON object of the given fields, in their order.
func row(kv ...any) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// requireBoundedSample checks what every sample must be: valid JSON and
// UTF-8 within MaxSampleBytes.
func requireBoundedSample(t *testing.T, sample []json.RawMessage) {
	t.Helper()
	b, err := json.Marshal(sample)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), MaxSampleBytes, "%s", b)
	require.True(t, utf8.Valid(b), "%q", b)
	for _, r := range sample {
		require.True(t, json.Valid(r), "%s", r)
	}
}

// cutNote is what a cut row says of itself, "" for a row kept whole.
func cutNote(t *testing.T, r json.RawMessage) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r, &m))
	s, _ := m[cutKey].(string)
	return s
}

func TestCapSample(t *testing.T) {
	mb9 := strings.Repeat("a", 9<<20)
	mb3 := strings.Repeat("b", 3<<20)
	small := row("id", 2, "name", "Delta", "price", 162)
	var many []json.RawMessage
	for i := range 10 {
		many = append(many, row("id", i, "pad", strings.Repeat("x", 280)))
	}
	wide := map[string]int{}
	for i := range 5000 {
		wide[fmt.Sprintf("field_%04d", i)] = i
	}
	wideRow, _ := json.Marshal(wide)
	cases := []struct {
		name  string
		rows  []json.RawMessage
		check func(t *testing.T, got []json.RawMessage)
	}{{
		name: "one 9 MiB row is cut, not kept",
		rows: []json.RawMessage{row("id", 1, "blob", mb9, "ok", true)},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 1)
			note := cutNote(t, got[0])
			require.Contains(t, note, "the row is 9.0 MiB; it was cut to fit the preview")
			var m map[string]any
			require.NoError(t, json.Unmarshal(got[0], &m))
			require.EqualValues(t, 1, m["id"])
			require.Equal(t, true, m["ok"])
			require.True(t, strings.HasPrefix(m["blob"].(string), "aaaa"))
			require.True(t, strings.HasSuffix(m["blob"].(string), "…"))
		},
	}, {
		name: "a 3 MiB row shares the room with the small rows after it",
		rows: []json.RawMessage{row("id", 1, "blob", mb3), small, small},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 3)
			require.Contains(t, cutNote(t, got[0]), "the row is 3.0 MiB")
			require.Equal(t, small, got[1], "rows that fit stay whole")
			require.Equal(t, small, got[2])
		},
	}, {
		name: "three huge rows are each cut to a share",
		rows: []json.RawMessage{row("blob", mb3), row("blob", mb3), row("blob", mb3)},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 3)
			for _, r := range got {
				require.NotEmpty(t, cutNote(t, r))
			}
		},
	}, {
		name: "many small rows: the leading ones that fit, whole",
		rows: many,
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 6) // 2 + 6*296 + 5 bytes; a seventh would leave each under 512 bytes to cut to
			require.Equal(t, many[:6], got)
		},
	}, {
		name: "rows that fit are kept as they are",
		rows: []json.RawMessage{small, small, small},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Equal(t, []json.RawMessage{small, small, small}, got)
		},
	}, {
		name: "nested objects and arrays are summarized",
		rows: []json.RawMessage{row("id", 7, "meta", map[string]string{"a": strings.Repeat("z", 5000), "b": "c"},
			"tags", []int{1, 2, 3}, "list", make([]int, 2000))},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 1)
			var m map[string]any
			require.NoError(t, json.Unmarshal(got[0], &m))
			require.NotEmpty(t, m[cutKey])
			require.Equal(t, []any{1.0, 2.0, 3.0}, m["tags"], "a small nested value stays")
			require.Regexp(t, `^\(an object of 2 fields, 4\.9 KiB\)$`, m["meta"])
			require.Regexp(t, `^\(an array of 2000 items, 3\.9 KiB\)$`, m["list"])
		},
	}, {
		name: "a row of thousands of fields keeps the leading ones and says how many it left out",
		rows: []json.RawMessage{wideRow},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 1)
			require.Regexp(t, `; [0-9]+ of 5000 fields left out$`, cutNote(t, got[0]))
			require.Contains(t, string(got[0]), `"field_0000":0`)
		},
	}, {
		name: "a long string of multibyte runes is clipped at a rune boundary",
		rows: []json.RawMessage{row("city", strings.Repeat("é€😀", 2000))},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 1)
			require.NotEmpty(t, cutNote(t, got[0]))
		},
	}, {
		name: "invalid UTF-8 is never kept",
		rows: []json.RawMessage{json.RawMessage("{\"name\":\"ab\xff\xfecd\",\"n\":1}"), json.RawMessage("{\"long\":\"" + strings.Repeat("é", 3000) + "\xc3\"}")},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 2)
			var m map[string]any
			require.NoError(t, json.Unmarshal(got[0], &m))
			require.Equal(t, "ab\uFFFD\uFFFDcd", m["name"])
			require.Equal(t, "the row was not valid UTF-8; its invalid bytes were replaced", m[cutKey])
			require.EqualValues(t, 1, m["n"])
		},
	}, {
		name: "a row that is not JSON is only described",
		rows: []json.RawMessage{json.RawMessage(`{"a":`), small},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 2)
			require.Equal(t, "the row is not valid JSON (5 bytes)", cutNote(t, got[0]))
			require.Equal(t, small, got[1])
		},
	}, {
		name: "a huge value that is not an object becomes the field value",
		rows: []json.RawMessage{json.RawMessage(`"` + mb3 + `"`)},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Len(t, got, 1)
			var m map[string]any
			require.NoError(t, json.Unmarshal(got[0], &m))
			require.True(t, strings.HasPrefix(m["value"].(string), "bbb"))
		},
	}, {
		name: "a row's own _cut field is kept; the note takes another name",
		rows: []json.RawMessage{row(cutKey, "mine", "blob", mb3)},
		check: func(t *testing.T, got []json.RawMessage) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(got[0], &m))
			require.Equal(t, "mine", m[cutKey])
			require.Contains(t, m[cutKey+"2"], "it was cut")
		},
	}, {
		name: "long keys and numbers are cut too",
		rows: []json.RawMessage{json.RawMessage(`{"` + strings.Repeat("k", 4000) + `":` + strings.Repeat("9", 4000) + `}`)},
		check: func(t *testing.T, got []json.RawMessage) {
			require.Contains(t, string(got[0]), `"(a number of 4000 characters)"`)
		},
	}, {
		name: "no rows",
		rows: nil,
		check: func(t *testing.T, got []json.RawMessage) {
			require.Empty(t, got)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CapSample(c.rows)
			requireBoundedSample(t, got)
			c.check(t, got)
		})
	}
}

func TestPreviewOfIsBounded(t *testing.T) {
	wide := map[string]string{}
	for i := range 20000 {
		wide[fmt.Sprintf("%s_%05d", strings.Repeat("f", 100), i)] = "v"
	}
	big, _ := json.Marshal([]any{wide, map[string]string{"blob": strings.Repeat("x", 9<<20)}})
	p, err := PreviewOf(big, "cas://sha256:00", SampleRows)
	require.NoError(t, err)
	require.Equal(t, DataDataset, p.Type)
	require.Equal(t, 2, p.RowCount)
	require.Equal(t, len(big), p.Bytes)
	require.Positive(t, p.FieldsOmitted)
	require.Equal(t, 20001, len(p.Fields)+p.FieldsOmitted)
	for _, f := range p.Fields {
		require.LessOrEqual(t, len(f.Name), maxFieldName+len("…"))
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Less(t, len(b), MaxSampleBytes+MaxFieldsBytes+256, "the preview is small whatever the data")
	requireBoundedSample(t, p.Sample)

	// A preview a tool made itself is bounded the same way.
	own := DataPreview{Type: DataDataset, Sample: []json.RawMessage{row("blob", strings.Repeat("y", 3<<20))},
		Fields: []Field{{Name: strings.Repeat("n", 1000), Type: "string"}}}
	own = own.Bounded()
	requireBoundedSample(t, own.Sample)
	require.Len(t, own.Fields, 1)
	require.Equal(t, strings.Repeat("n", maxFieldName)+"…", own.Fields[0].Name)
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 bytes", 812: "812 bytes", 2048: "2 KiB", 3500: "3.4 KiB",
		1 << 20: "1 MiB", 9<<20 + 400<<10: "9.4 MiB", 4194304: "4 MiB"} {
		require.Equal(t, want, FormatBytes(n), n)
	}
}

// FuzzCapSample: rows from a tool or a fetched API, any bytes. The
// sample is always valid JSON and UTF-8 within its bound, and a cut row
// is an object that fits the room it was given.
func FuzzCapSample(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `"x"`, `{"a":{"b":[1,{"c":"d"}]}}`, "{\"a\":\"\xff\"}", `{"_cut":1,"_cut2":2}`, `{"a":`, ``, `null`, `{"a":1} {}`} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, data []byte, copies int) {
		copies = 1 + abs(copies)%4
		rows := make([]json.RawMessage, copies)
		for i := range rows {
			rows[i] = json.RawMessage(strings.Repeat(string(data), i+1))
		}
		requireBoundedSample(t, CapSample(rows))
		cut := CutRow(data, minCutRow)
		require.LessOrEqual(t, len(cut), minCutRow, "%s", cut)
		require.True(t, utf8.Valid(cut))
		var m map[string]any
		require.NoError(t, json.Unmarshal(cut, &m), "%s", cut)
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
