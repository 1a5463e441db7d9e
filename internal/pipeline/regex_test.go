package pipeline

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRegexExtract(t *testing.T) {
	rx := func(field, pattern string) string {
		b, _ := json.Marshal(pattern)
		return `[{"step": "regex_extract", "field": "` + field + `", "pattern": ` + string(b) + `}]`
	}
	contacts := `[{"phone": "call 555-123-4567 now"}, {"phone": "none"}, {"phone": null}, {}, {"phone": 5551234567}]`
	runCases(t, []stepCase{
		{name: "numbered groups", input: contacts, steps: rx("phone", `(\d{3})-?(\d{3})-?(\d{4})`),
			want: `[{"phone": "call 555-123-4567 now", "phone_1": "555", "phone_2": "123", "phone_3": "4567"},
				{"phone": "none", "phone_1": null, "phone_2": null, "phone_3": null},
				{"phone": null, "phone_1": null, "phone_2": null, "phone_3": null},
				{"phone_1": null, "phone_2": null, "phone_3": null},
				{"phone": 5551234567, "phone_1": "555", "phone_2": "123", "phone_3": "4567"}]`},
		{name: "named groups", input: `[{"email": "ann@example.com"}]`, steps: rx("email", `(?P<user>[^@]+)@(?P<domain>.+)`),
			want: `[{"email": "ann@example.com", "user": "ann", "domain": "example.com"}]`},
		{name: "named and numbered", input: `[{"v": "v1.2"}]`, steps: rx("v", `v(?P<major>\d+)\.(\d+)`),
			want: `[{"v": "v1.2", "major": "1", "v_2": "2"}]`},
		{name: "no groups: the match", input: `[{"s": "order 123 shipped"}]`, steps: rx("s", `\d+`),
			want: `[{"s": "order 123 shipped", "s_match": "123"}]`},
		{name: "first match only", input: `[{"s": "a1 b2"}]`, steps: rx("s", `[a-z](\d)`), want: `[{"s": "a1 b2", "s_1": "1"}]`},
		{name: "optional group not taking part", input: `[{"s": "ab"}]`, steps: rx("s", `a(x)?b`), want: `[{"s": "ab", "s_1": null}]`},
		{name: "a named group replaces a field", input: `[{"s": "k=v", "key": "old"}]`, steps: rx("s", `(?P<key>\w+)=`), want: `[{"s": "k=v", "key": "k"}]`},
		{name: "nested field", input: `[{"a": {"b": "x9"}}]`, steps: rx("a.b", `\d`), want: `[{"a": {"b": "x9"}, "a.b_match": "9"}]`},
		{name: "no row matches: a warning", input: `[{"s": "abc"}]`, steps: rx("s", `\d`), want: `[{"s": "abc", "s_match": null}]`,
			warns: []string{`step 0 (regex_extract): pattern "\\d" matched no row's s (e.g. "abc")`}},
		{name: "field in no row", input: `[{"s": "abc"}]`, steps: rx("t", `\d`),
			err: `step 0 (regex_extract): field "t" is in no row; the rows have s`},
	}, nil)
}

func TestRegexExtractBounds(t *testing.T) {
	t.Run("step timeout", func(t *testing.T) {
		rows := make([]map[string]any, 2000)
		for i := range rows {
			rows[i] = map[string]any{"s": strings.Repeat("ab", 1000)}
		}
		p, err := Decode([]byte(callOn(`[{"step": "regex_extract", "field": "s", "pattern": "(a|b|ab){300}$"}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, Env{
			Load:   func(context.Context, string) (Value, error) { return TableOf(rows), nil },
			Limits: Limits{StepTimeout: 20 * time.Millisecond},
		})
		require.EqualError(t, err, "step 0 (regex_extract): ran past the limit of 20ms; give it less to do (table_filter, top_k or table_select first)")
	})
	t.Run("long values are read up to 64 KiB", func(t *testing.T) {
		long := strings.Repeat("é", 40000) + "42" // 80,002 bytes
		p, err := Decode([]byte(callOn(`[{"step": "regex_extract", "field": "s", "pattern": "(\\d+)|(é+)$"}]`)))
		require.NoError(t, err)
		res, err := Run(t.Context(), p, Env{Load: func(context.Context, string) (Value, error) {
			return TableOf([]map[string]any{{"s": long}}), nil
		}})
		require.NoError(t, err)
		row := res.Value.Table[0]
		require.Nil(t, row["s_1"], "the digits lie past 64 KiB")
		require.Len(t, row["s_2"], 64<<10, "cut on a rune boundary")
	})
}

// FuzzRegexExtract: any pattern Decode accepts runs on any text, and every
// value it extracts is null or a part of that text.
func FuzzRegexExtract(f *testing.F) {
	for _, s := range []struct{ pattern, text string }{
		{`(\d{3})-(\d{3})-(\d{4})`, "555-123-4567"},
		{`(?P<user>[^@]+)@(?P<domain>.+)`, "ann@example.com"},
		{`\d+`, "order 123"},
		{`a(x)?b`, "ab"},
		{`(?i)(ÄÖ)+`, "xäöÄÖ"},
		{`^$`, ""},
		{`(a*)*`, strings.Repeat("a", 100)},
		{`[[:alpha:]]{2,5}(?:-(\w+))?`, "ab-cd"},
		{`(`, "x"},
		{`a(?=b)`, "ab"},
		{`x{1001}`, "x"},
		{"\xff(.)", "\xff\xfe"},
	} {
		f.Add(s.pattern, s.text)
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		p := Pipeline{SessionID: "f", InputRef: "in", Steps: []Step{{Op: OpRegexExtract, Field: "s", Pattern: pattern}}}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		p, err = Decode(b) // as the model's call arrives: JSON, so valid UTF-8
		if err != nil {
			return
		}
		in := TableOf([]map[string]any{{"s": text}})
		res, err := Run(t.Context(), p, Env{Load: func(context.Context, string) (Value, error) { return in, nil }})
		require.NoError(t, err)
		require.Len(t, res.Value.Table, 1)
		row := res.Value.Table[0]
		names := regexOutputs(regexp.MustCompile(p.Steps[0].Pattern), "s")
		for _, n := range names {
			v, ok := row[n]
			require.True(t, ok, "every output field is set: %s", n)
			if v != nil {
				require.Contains(t, text, v.(string))
			}
		}
		if _, named := row["s"]; !named || row["s"] != text {
			require.Contains(t, names, "s", "only an output named s replaces the field")
		}
		_, err = json.Marshal(res.Value)
		require.NoError(t, err)
	})
}
