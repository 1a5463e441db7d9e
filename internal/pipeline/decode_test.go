package pipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func call(steps string) string {
	return `{"session_id": "s1", "pipeline": ` + steps + `}`
}

func callOn(steps string) string {
	return `{"session_id": "s1", "input_ref": "in", "pipeline": ` + steps + `}`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Pipeline
	}{
		{
			name: "seed flights call, defaults filled in",
			raw: call(`[{"step": "http_request", "url": "https://api.flights.example/search", "params": {"origin": "NYC", "dest": "LAX"}},
				{"step": "table_sort", "field": "price"}, {"step": "top_k", "k": 3}]`),
			want: Pipeline{SessionID: "s1", Steps: []Step{
				{Op: OpHTTPRequest, URL: "https://api.flights.example/search", Method: "GET", Params: map[string]any{"origin": "NYC", "dest": "LAX"}},
				{Op: OpTableSort, Field: "price", Order: "asc"},
				{Op: OpTopK, K: 3},
			}},
		},
		{
			name: "filter value keeps its number as written",
			raw:  callOn(`[{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 500.0}}]`),
			want: Pipeline{SessionID: "s1", InputRef: "in", Steps: []Step{
				{Op: OpTableFilter, Condition: &Condition{Field: "price", Op: "<", Value: json.Number("500.0")}},
			}},
		},
		{
			name: "join with both refs as step 0",
			raw:  call(`[{"step": "join", "left": "cas://a", "right": "cas://b", "on": "id", "how": "left"}]`),
			want: Pipeline{SessionID: "s1", Steps: []Step{{Op: OpJoin, Left: "cas://a", Right: "cas://b", On: "id", How: "left"}}},
		},
		{
			name: "groupby count without by",
			raw:  callOn(`[{"step": "groupby", "agg": "count"}]`),
			want: Pipeline{SessionID: "s1", InputRef: "in", Steps: []Step{{Op: OpGroupBy, Agg: "count"}}},
		},
		{
			name: "POST with a nested body",
			raw:  call(`[{"step": "http_request", "url": "http://x.example/q", "method": "POST", "params": {"filter": {"a": [1, 2]}}}]`),
			want: Pipeline{SessionID: "s1", Steps: []Step{{Op: OpHTTPRequest, URL: "http://x.example/q", Method: "POST",
				Params: map[string]any{"filter": map[string]any{"a": []any{json.Number("1"), json.Number("2")}}}}}},
		},
		{
			name: "the other kinds",
			raw: callOn(`[{"step": "table_select", "fields": ["a", "b.c"]}, {"step": "jq_transform", "query": "map(.a)"},
				{"step": "regex_extract", "field": "a", "pattern": "(\\d+)"}, {"step": "parse_date", "field": "d", "format": "%Y-%m-%d"}]`),
			want: Pipeline{SessionID: "s1", InputRef: "in", Steps: []Step{
				{Op: OpTableSelect, Fields: []string{"a", "b.c"}},
				{Op: OpJQTransform, Query: "map(.a)"},
				{Op: OpRegexExtract, Field: "a", Pattern: `(\d+)`},
				{Op: OpParseDate, Field: "d", Format: "%Y-%m-%d"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.raw))
			require.NoError(t, err)
			require.Equal(t, tt.want, p)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		err  string
		step int // -1: not a step's error
	}{
		{"not an object", `[1]`, `arguments: want a JSON object {"session_id": ..., "pipeline": [...]}, got an array [1]`, -1},
		{"not JSON", `{"session_id": `, `arguments: want a JSON object {"session_id": ..., "pipeline": [...]}, got {"session_id":`, -1},
		{"trailing data", `{"session_id": "s", "pipeline": []} {}`, `arguments: want a JSON object {"session_id": ..., "pipeline": [...]}, got {"session_id": "s", "pipeline": []} {}`, -1},
		{"unknown top field", `{"session_id": "s", "steps": []}`, `unknown field "steps"; the arguments are session_id, pipeline and input_ref`, -1},
		{"no session", `{"pipeline": []}`, `missing "session_id": want a string`, -1},
		{"session not a string", `{"session_id": 7, "pipeline": []}`, `session_id: want a string, got 7`, -1},
		{"no pipeline", `{"session_id": "s"}`, `missing "pipeline": want an array of steps such as [{"step": "http_request", "url": "https://..."}]`, -1},
		{"pipeline not array", `{"session_id": "s", "pipeline": {"step": "top_k"}}`, `pipeline: want an array of steps, got an object {"step":"top_k"}`, -1},
		{"empty pipeline", call(`[]`), `pipeline is empty; give at least one step`, -1},
		{"too many steps", callOn(`[` + strings.Repeat(`{"step": "top_k", "k": 1},`, 32) + `{"step": "top_k", "k": 1}]`), `pipeline has 33 steps; the limit is 32`, -1},
		{"empty input_ref", `{"session_id": "s", "input_ref": "", "pipeline": []}`, `input_ref: want a ref (a non-empty string), got ""`, -1},

		{"step not an object", callOn(`[{"step": "top_k", "k": 1}, "top_k"]`), `step 1: want an object such as {"step": "top_k", "k": 3}, got "top_k"`, 1},
		{"no step field", callOn(`[{"k": 1}]`), `step 0: missing "step": want one of http_request table_sort table_filter table_select top_k groupby join jq_transform regex_extract parse_date`, 0},
		{"unknown step", callOn(`[{"step": "sort", "field": "a"}]`), `step 0: step "sort": want one of http_request table_sort table_filter table_select top_k groupby join jq_transform regex_extract parse_date`, 0},
		{"field of another step", callOn(`[{"step": "table_sort", "field": "a", "k": 3}]`), `step 0 (table_sort): unknown field "k"; table_sort takes field, order`, 0},
		{"missing required field", callOn(`[{"step": "top_k"}]`), `step 0 (top_k): missing "k": want an integer ≥ 1`, 0},
		{"k zero", callOn(`[{"step": "top_k", "k": 0}]`), `step 0 (top_k): k: want an integer ≥ 1, got 0`, 0},
		{"k fraction", callOn(`[{"step": "top_k", "k": 2.5}]`), `step 0 (top_k): k: want an integer ≥ 1, got 2.5`, 0},
		{"k string", callOn(`[{"step": "top_k", "k": "3"}]`), `step 0 (top_k): k: want an integer ≥ 1, got "3"`, 0},
		{"null field", callOn(`[{"step": "table_sort", "field": null}]`), `step 0 (table_sort): field: want a field name, got null`, 0},
		{"empty field", callOn(`[{"step": "table_sort", "field": ""}]`), `step 0 (table_sort): field: want a field name, got ""`, 0},
		{"bad order", callOn(`[{"step": "table_sort", "field": "a", "order": "descending"}]`), `step 0 (table_sort): order "descending": want "asc" or "desc"`, 0},

		{"filter op", callOn(`[{"step": "top_k", "k": 5}, {"step": "top_k", "k": 5}, {"step": "table_filter", "condition": {"field": "name", "op": "like", "value": "a%"}}]`),
			`step 2 (table_filter): condition.op "like": want one of = != < <= > >= in contains`, 2},
		{"filter condition not object", callOn(`[{"step": "table_filter", "condition": "price < 5"}]`), `step 0 (table_filter): condition: want an object {"field": ..., "op": ..., "value": ...}, got "price < 5"`, 0},
		{"filter unknown condition field", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "=", "value": 1, "negate": true}}]`), `step 0 (table_filter): condition: unknown field "negate"; a condition has field, op and value`, 0},
		{"filter no value", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "="}}]`), `step 0 (table_filter): condition: missing "value" (null matches null and missing values)`, 0},
		{"filter in needs array", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "in", "value": "NYC"}}]`), `step 0 (table_filter): condition.value: "in" takes an array of values, e.g. ["NYC", "BOS"], got "NYC"`, 0},
		{"filter in of objects", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "in", "value": [1, {"x": 1}]}}]`), `step 0 (table_filter): condition.value[1]: "in" takes strings, numbers, booleans or null, got an object {"x":1}`, 0},
		{"filter < with bool", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "<", "value": true}}]`), `step 0 (table_filter): condition.value: "<" compares with a number or a string, got true`, 0},
		{"filter = with array", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "=", "value": [1, 2]}}]`), `step 0 (table_filter): condition.value: "=" compares with a string, number, boolean or null, got an array [1,2]; use "in" for a list of values`, 0},
		{"filter contains null", callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "contains", "value": null}}]`), `step 0 (table_filter): condition.value: "contains" takes a string (found in strings) or a string, number or boolean (found in arrays), got null`, 0},

		{"select empty", callOn(`[{"step": "table_select", "fields": []}]`), `step 0 (table_select): fields: want at least one field name`, 0},
		{"select twice", callOn(`[{"step": "table_select", "fields": ["a", "b", "a"]}]`), `step 0 (table_select): fields: "a" is named twice`, 0},
		{"select null name", callOn(`[{"step": "table_select", "fields": ["a", null]}]`), `step 0 (table_select): fields: want an array of field names, got an array ["a",null]`, 0},
		{"select not array", callOn(`[{"step": "table_select", "fields": "a,b"}]`), `step 0 (table_select): fields: want an array of field names, got "a,b"`, 0},

		{"groupby agg", callOn(`[{"step": "groupby", "by": ["a"], "agg": "median", "field": "x"}]`), `step 0 (groupby): agg "median": want one of count sum avg min max`, 0},
		{"groupby sum without field", callOn(`[{"step": "groupby", "by": ["a"], "agg": "sum"}]`), `step 0 (groupby): sum needs field: the field to aggregate, e.g. {"agg": "sum", "field": "price"}`, 0},
		{"groupby name clash", callOn(`[{"step": "groupby", "by": ["count"], "agg": "count"}]`), `step 0 (groupby): by: "count" is also the name of the aggregate; group by another field`, 0},

		{"join left after a step", callOn(`[{"step": "top_k", "k": 1}, {"step": "join", "left": "a", "right": "b", "on": "id"}]`), `step 1 (join): left is set but the step already has an input (the output of step 0); omit left to join that input with right`, 1},
		{"join left with input_ref", callOn(`[{"step": "join", "left": "a", "right": "b", "on": "id"}]`), `step 0 (join): left is set but the step already has an input (input_ref); omit left to join that input with right`, 0},
		{"join without input", call(`[{"step": "join", "right": "b", "on": "id"}]`), `step 0 (join): has no input: start the pipeline with http_request, or give input_ref`, 0},
		{"join how", callOn(`[{"step": "join", "right": "b", "on": "id", "how": "outer"}]`), `step 0 (join): how "outer": want "inner" or "left"`, 0},

		{"no input", call(`[{"step": "table_sort", "field": "a"}]`), `step 0 (table_sort): has no input: start the pipeline with http_request, or give input_ref`, 0},
		{"http not first", call(`[{"step": "http_request", "url": "https://a.example"}, {"step": "http_request", "url": "https://b.example"}]`), `step 1 (http_request): must be the first step: a fetch here would throw away the output of step 0; to combine data, join stored results by ref`, 1},
		{"http with input_ref", callOn(`[{"step": "http_request", "url": "https://a.example"}]`), `step 0 (http_request): the pipeline has input_ref, which is already the input of step 0; drop input_ref or this http_request`, 0},
		{"http no scheme", call(`[{"step": "http_request", "url": "api.flights.com/search"}]`), `step 0 (http_request): url "api.flights.com/search": want an absolute http:// or https:// URL, e.g. https://api.example.com/items`, 0},
		{"http ftp", call(`[{"step": "http_request", "url": "ftp://a.example/x"}]`), `step 0 (http_request): url "ftp://a.example/x": want an absolute http:// or https:// URL, e.g. https://api.example.com/items`, 0},
		{"http method", call(`[{"step": "http_request", "url": "https://a.example", "method": "get"}]`), `step 0 (http_request): method "get": want "GET" or "POST"`, 0},
		{"http GET object param", call(`[{"step": "http_request", "url": "https://a.example", "params": {"q": {"a": 1}}}]`), `step 0 (http_request): params.q: a GET sends params in the query string, so each is a string, number, boolean or an array of them, got an object {"a":1}; use method POST to send a JSON body`, 0},
		{"http params not object", call(`[{"step": "http_request", "url": "https://a.example", "params": "a=1"}]`), `step 0 (http_request): params: want an object, got "a=1"`, 0},
		{"http response_as", call(`[{"step": "http_request", "url": "https://a.example", "response_as": "blob"}]`), `step 0 (http_request): response_as "blob": want "data" or "file"`, 0},
		{"http response_as not a string", call(`[{"step": "http_request", "url": "https://a.example", "response_as": true}]`), `step 0 (http_request): response_as: want "data" or "file", got true`, 0},
		{"http body_ref with GET", call(`[{"step": "http_request", "url": "https://a.example", "body_ref": "cas://sha256:aa"}]`), `step 0 (http_request): body_ref sends a file as the body of a POST: give "method": "POST"`, 0},
		{"http body_ref empty", call(`[{"step": "http_request", "url": "https://a.example", "method": "POST", "body_ref": ""}]`), `step 0 (http_request): body_ref: want a ref of a stored file (cas://…) or previous_results[i], got ""`, 0},
		{"http body_ref object param", call(`[{"step": "http_request", "url": "https://a.example", "method": "POST", "body_ref": "previous_results[0]", "params": {"q": {"a": 1}}}]`),
			`step 0 (http_request): params.q: a POST with body_ref sends params in the query string, so each is a string, number, boolean or an array of them, got an object {"a":1}`, 0},

		{"jq syntax", callOn(`[{"step": "jq_transform", "query": ".items[] |"}]`), `step 0 (jq_transform): query ".items[] |": unexpected EOF at byte 10`, 0},
		{"jq unknown function", callOn(`[{"step": "jq_transform", "query": ".items[] | selct(.x)"}]`), `step 0 (jq_transform): query ".items[] | selct(.x)": function not defined: selct/1`, 0},
		{"jq input", callOn(`[{"step": "jq_transform", "query": "[inputs]"}]`), `step 0 (jq_transform): query "[inputs]": input(s)/0 is not allowed`, 0},
		{"jq empty", callOn(`[{"step": "jq_transform", "query": "  "}]`), `step 0 (jq_transform): query: want a jq query such as .items, got ""`, 0},

		{"regex syntax", callOn(`[{"step": "regex_extract", "field": "a", "pattern": "(\\d+"}]`), "step 0 (regex_extract): pattern \"(\\\\d+\": missing closing ): `(\\d+`", 0},
		{"regex lookahead", callOn(`[{"step": "regex_extract", "field": "a", "pattern": "a(?=b)"}]`), "step 0 (regex_extract): pattern \"a(?=b)\": invalid or unsupported Perl syntax: `(?=` (Go regular expressions (RE2) have no lookaround and no backreferences)", 0},
		{"regex backreference", callOn(`[{"step": "regex_extract", "field": "a", "pattern": "(a)\\1"}]`), "step 0 (regex_extract): pattern \"(a)\\\\1\": invalid escape sequence: `\\1` (Go regular expressions (RE2) have no lookaround and no backreferences)", 0},
		{"regex too complex", callOn(`[{"step": "regex_extract", "field": "a", "pattern": "(.*){1000}"}]`), `step 0 (regex_extract): pattern "(.*){1000}" is too complex (it compiles to 4002 instructions; the limit is 2000): use smaller repeat counts`, 0},
		{"regex no field", callOn(`[{"step": "regex_extract", "pattern": "a"}]`), `step 0 (regex_extract): missing "field": want a field name`, 0},

		{"date Go layout", callOn(`[{"step": "parse_date", "field": "d", "format": "2006-01-02"}]`), `step 0 (parse_date): format "2006-01-02" has no % directive; write strftime directives, e.g. %Y-%m-%d %H:%M:%S for 2024-03-01 14:30:00`, 0},
		{"date unknown directive", callOn(`[{"step": "parse_date", "field": "d", "format": "%Y-%Q"}]`), `step 0 (parse_date): format "%Y-%Q": unexpected format "%Q"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.raw))
			require.EqualError(t, err, tt.err)
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "the model can fix it")
			var se *StepError
			if tt.step < 0 {
				require.False(t, errors.As(err, &se))
				return
			}
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.step, se.Index)
		})
	}
}

// TestRunChecksLikeDecode: a Pipeline built in Go gets Decode's checks.
func TestRunChecksLikeDecode(t *testing.T) {
	tests := []struct {
		name string
		p    Pipeline
		err  string
	}{
		{"field of another kind", Pipeline{InputRef: "in", Steps: []Step{{Op: OpTopK, K: 2, Field: "a"}}}, `step 0 (top_k): unknown field "field"; top_k takes k`},
		{"unknown kind", Pipeline{InputRef: "in", Steps: []Step{{Op: "pivot"}}}, `step 0 (pivot): step "pivot": want one of http_request table_sort table_filter table_select top_k groupby join jq_transform regex_extract parse_date`},
		{"no steps", Pipeline{InputRef: "in"}, `pipeline is empty; give at least one step`},
		{"no condition", Pipeline{InputRef: "in", Steps: []Step{{Op: OpTableFilter}}}, `step 0 (table_filter): missing "condition": want an object {"field": ..., "op": ..., "value": ...}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t.Context(), tt.p, Env{})
			require.EqualError(t, err, tt.err)
		})
	}
}

// TestParametersSchema checks that the published schema compiles and
// agrees with Decode: whatever Decode accepts the schema accepts, and
// whatever the schema refuses Decode refuses.
func TestParametersSchema(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(Parameters))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("pipeline.json", doc))
	sch, err := c.Compile("pipeline.json")
	require.NoError(t, err)

	calls := []string{
		call(`[{"step": "http_request", "url": "https://a.example/f", "params": {"origin": "NYC", "n": 3, "tags": ["a", "b"]}}, {"step": "table_sort", "field": "price", "order": "desc"}, {"step": "top_k", "k": 3}]`),
		call(`[{"step": "http_request", "url": "https://a.example/f", "method": "POST", "params": {"q": {"deep": [1]}}}]`),
		callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "in", "value": ["x", 1, null]}}]`),
		callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "=", "value": null}}]`),
		callOn(`[{"step": "table_select", "fields": ["a"]}, {"step": "groupby", "by": ["a"], "agg": "count"}]`),
		callOn(`[{"step": "groupby", "agg": "sum", "field": "x"}]`),
		call(`[{"step": "join", "left": "a", "right": "b", "on": "id"}]`),
		callOn(`[{"step": "join", "right": "b", "on": "id", "how": "left"}]`),
		callOn(`[{"step": "jq_transform", "query": "."}, {"step": "regex_extract", "field": "a", "pattern": "x"}, {"step": "parse_date", "field": "d", "format": "%s"}]`),
		// Refused by the schema, and so by Decode:
		call(`[{"step": "table_sort", "field": "a", "k": 3}]`),
		call(`[{"step": "top_k", "k": 0}]`),
		call(`[{"step": "top_k", "k": 1.5}]`),
		call(`[{"step": "groupby", "agg": "median"}]`),
		call(`[{"step": "table_filter", "condition": {"field": "a", "op": "like", "value": 1}}]`),
		call(`[{"step": "table_filter", "condition": {"field": "a", "op": "=", "value": {"x": 1}}}]`),
		call(`[{"step": "table_filter", "condition": {"field": "a", "op": "="}}]`),
		call(`[{"step": "table_select", "fields": []}]`),
		call(`[{"step": "table_select", "fields": ["a", "a"]}]`),
		call(`[{"step": "http_request", "url": "https://a.example", "method": "PUT"}]`),
		call(`[{"step": "join", "right": "b", "on": "id", "how": "outer"}]`),
		call(`[{"step": "teleport"}]`),
		call(`[]`),
		`{"session_id": "s", "pipeline": [{"step": "top_k", "k": 1}], "extra": 1}`,
		`{"pipeline": [{"step": "top_k", "k": 1}]}`,
	}
	for _, raw := range calls {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
		require.NoError(t, err)
		schemaErr := sch.Validate(inst)
		_, decodeErr := Decode([]byte(raw))
		if decodeErr == nil {
			require.NoError(t, schemaErr, "Decode accepts %s", raw)
		}
		if schemaErr != nil {
			require.Error(t, decodeErr, "the schema refuses %s", raw)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts it accepts again
// after a round trip through JSON, with the same Key.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		call(`[{"step": "http_request", "url": "https://api.example/flights", "params": {"origin": "NYC", "dest": "LAX"}}, {"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": 3}]`),
		callOn(`[{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 500}}, {"step": "table_select", "fields": ["id", "name", "price"]}]`),
		callOn(`[{"step": "groupby", "by": ["category"], "agg": "sum", "field": "revenue"}]`),
		call(`[{"step": "join", "left": "cas://sha256:aa", "right": "cas://sha256:bb", "on": "id"}]`),
		callOn(`[{"step": "jq_transform", "query": ".items[] | select(.price < 100)"}]`),
		callOn(`[{"step": "regex_extract", "pattern": "(\\d{3})-(\\d{3})-(\\d{4})", "field": "phone"}]`),
		callOn(`[{"step": "parse_date", "field": "created_at", "format": "%Y-%m-%d"}]`),
		callOn(`[{"step": "table_filter", "condition": {"field": "a", "op": "in", "value": [1, "x", null, true]}}]`),
		call(`[{"step": "http_request", "url": "https://files.example/report.pdf", "response_as": "file"}]`),
		call(`[{"step": "http_request", "url": "https://ocr.example/scan", "method": "POST", "body_ref": "previous_results[1]", "params": {"lang": "en"}}]`),
		`{"session_id": "s", "input_ref": "previous_results[0]", "pipeline": [{"step": "top_k", "k": 1}]}`,
		`{"session_id": "", "pipeline": [{"step": "top_k", "k": 1e400}]}`,
		`{"session_id": "s", "pipeline": [{"step": "top_k", "k": 1}], "session_id": 2}`,
		`[]`, `null`, `{}`, `{"pipeline": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Decode(raw)
		if err != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		q, err := Decode(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, Key(p), Key(q))
	})
}
