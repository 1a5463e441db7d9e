package strictschema_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// TestMake: what each dialect's strict mode is sent for a schema, or why
// the schema goes without strict.
func TestMake(t *testing.T) {
	tests := []struct {
		name    string
		d       strictschema.Dialect
		schema  string
		want    string // the rewritten schema; "" when not strict
		refused string // a part of the reason
	}{
		{name: "strict as written", d: strictschema.OpenAI,
			schema: `{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false}`,
			want:   `{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false}`},
		{name: "no parameters", d: strictschema.OpenAI, schema: ``,
			want: `{"type":"object","properties":{},"required":[],"additionalProperties":false}`},
		{name: "optional as nullable, closed", d: strictschema.OpenAI,
			schema: `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10},
				"order":{"type":"string","enum":["asc","desc"]},"when":{"type":["string","number"]},"at":{"$ref":"#/$defs/at"}},
				"required":["q"],"$defs":{"at":{"type":"string","format":"date-time"}}}`,
			want: `{"type":"object","additionalProperties":false,"required":["q","at","limit","order","when"],
				"properties":{"q":{"type":"string"},"limit":{"type":["integer","null"],"minimum":1,"maximum":50,"description":"default: 10"},
				"order":{"type":["string","null"],"enum":["asc","desc",null]},"when":{"type":["string","number","null"]},
				"at":{"anyOf":[{"$ref":"#/$defs/at"},{"type":"null"}]}},"$defs":{"at":{"type":"string","format":"date-time"}}}`},
		{name: "nested objects and arrays closed, keywords to the description", d: strictschema.OpenAI,
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"choices":{"type":"array","uniqueItems":true,"maxItems":20,
				"items":{"type":"object","description":"A choice","properties":{"label":{"type":"string","minLength":1,"maxLength":200}},"required":["label"]}}},"required":["choices"]}`,
			want: `{"type":"object","additionalProperties":false,"required":["choices"],"properties":{"choices":{"type":"array","maxItems":20,"description":"uniqueItems: true",
				"items":{"type":"object","description":"A choice","additionalProperties":false,"required":["label"],
				"properties":{"label":{"type":"string","description":"maxLength: 200, minLength: 1"}}}}}}`},
		{name: "oneOf is anyOf", d: strictschema.OpenAI,
			schema: `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"],"additionalProperties":false}`,
			want:   `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"],"additionalProperties":false}`},
		{name: "a const optional", d: strictschema.OpenAI,
			schema: `{"type":"object","properties":{"k":{"const":"x"}}}`,
			want:   `{"type":"object","properties":{"k":{"anyOf":[{"const":"x"},{"type":"null"}]}},"required":["k"],"additionalProperties":false}`},
		{name: "anthropic keeps optional, drops bounds", d: strictschema.Anthropic,
			schema: `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50},"tags":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"string"}}},"required":["q"]}`,
			want: `{"type":"object","additionalProperties":false,"required":["q"],"properties":{"q":{"type":"string"},
				"limit":{"type":"integer","description":"maximum: 50, minimum: 1"},"tags":{"type":"array","minItems":1,"description":"maxItems: 5","items":{"type":"string"}}}}`},
		{name: "anthropic allOf", d: strictschema.Anthropic,
			schema: `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"]}`,
			want:   `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}`},

		{name: "a free-form object", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"params":{"type":"object","description":"query parameters"}}}`,
			refused: "at /properties/params: an object without declared properties"},
		{name: "additional properties allowed", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`,
			refused: "allows properties it does not declare"},
		{name: "a value of any type", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"value":{"description":"anything"}}}`,
			refused: "at /properties/value: a value of any type"},
		{name: "not", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}}`,
			refused: "keyword not"},
		{name: "allOf for OpenAI", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}}}`,
			refused: "allOf"},
		{name: "tuple items", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"p":{"type":"array","items":[{"type":"number"},{"type":"number"}]}}}`,
			refused: "tuple"},
		{name: "root not an object", d: strictschema.OpenAI, schema: `{"type":"string"}`, refused: `root's type`},
		{name: "a union at the root", d: strictschema.Anthropic,
			schema: `{"type":"object","anyOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{"type":"string"}}}]}`, refused: "anyOf at the root"},
		{name: "not JSON", d: strictschema.OpenAI, schema: `{"type":`, refused: "not JSON"},
		{name: "an undeclared required property", d: strictschema.OpenAI,
			schema:  `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`,
			refused: `required property "b"`},
		{name: "anthropic recursion", d: strictschema.Anthropic,
			schema:  `{"type":"object","properties":{"node":{"$ref":"#/$defs/node"}},"required":["node"],"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["kids"]}}}`,
			refused: "recursive"},
		{name: "anthropic enum of objects", d: strictschema.Anthropic,
			schema:  `{"type":"object","properties":{"a":{"enum":[{"x":1}]}},"required":["a"]}`,
			refused: "enum with objects"},
		{name: "too deep", d: strictschema.OpenAI, schema: deep(12), refused: "nested more than 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strictschema.Make(tt.d, json.RawMessage(tt.schema))
			if tt.refused != "" {
				require.False(t, r.Strict, "%s", r.Schema)
				require.Contains(t, r.Reason, tt.refused)
				if tt.schema != "" {
					require.Equal(t, tt.schema, string(r.Schema), "a schema that cannot be strict goes as written")
				}
				return
			}
			require.True(t, r.Strict, r.Reason)
			require.JSONEq(t, tt.want, string(r.Schema))
			require.NoError(t, strictschema.Check(tt.d, r.Schema), "what Make writes is in the subset as written")
		})
	}
}

// deep is an object schema nested n levels.
func deep(n int) string {
	s := `{"type":"string"}`
	for range n {
		s = `{"type":"object","properties":{"a":` + s + `},"required":["a"]}`
	}
	return s
}

// TestCheck: a schema is strict as written only when Make would change
// nothing.
func TestCheck(t *testing.T) {
	require.NoError(t, strictschema.Check(strictschema.OpenAI, json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`)))
	require.ErrorContains(t, strictschema.Check(strictschema.OpenAI, json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`)), "only rewritten")
	require.ErrorContains(t, strictschema.Check(strictschema.OpenAI, json.RawMessage(`{"type":"object","properties":{"a":{}}}`)), "any type")
}

// TestRestore: the nulls a model wrote for properties made nullable are
// the properties left out; the nulls the tool's schema takes stay.
func TestRestore(t *testing.T) {
	schema := `{"type":"object","required":["q"],"properties":{
		"q":{"type":"string"},"limit":{"type":"integer"},"note":{"type":["string","null"]},"any":{},
		"at":{"$ref":"#/$defs/at"},
		"steps":{"type":"array","items":{"anyOf":[
			{"type":"object","required":["step"],"properties":{"step":{"enum":["sort"]},"field":{"type":"string"},"order":{"type":"string"}}},
			{"type":"object","required":["step"],"properties":{"step":{"enum":["top"]},"k":{"type":"integer"},"order":{"type":"string"}}}]}},
		"inner":{"type":"object","properties":{"x":{"type":"string"}}}},
		"$defs":{"at":{"type":"string"}}}`
	tests := []struct {
		name, args, want string
	}{
		{name: "nothing to restore", args: `{"q":"a",  "limit":3}`, want: `{"q":"a",  "limit":3}`},
		{name: "optional nulls left out", args: `{"q":"a","limit":null,"at":null}`, want: `{"q":"a"}`},
		{name: "a nullable null stays", args: `{"q":"a","note":null,"any":null}`, want: `{"q":"a","note":null,"any":null}`},
		{name: "a required null stays", args: `{"q":null}`, want: `{"q":null}`},
		{name: "nested", args: `{"q":"a","inner":{"x":null}}`, want: `{"inner":{},"q":"a"}`},
		{name: "a tagged union's branch", args: `{"q":"a","steps":[{"step":"sort","field":"price","order":null},{"step":"top","k":3,"order":null}]}`,
			want: `{"q":"a","steps":[{"field":"price","step":"sort"},{"k":3,"step":"top"}]}`},
		{name: "big numbers kept", args: `{"q":"a","limit":12345678901234567890,"at":null}`, want: `{"limit":12345678901234567890,"q":"a"}`},
		{name: "not JSON", args: `{"q":null`, want: `{"q":null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strictschema.Restore(json.RawMessage(schema), json.RawMessage(tt.args))
			require.Equal(t, tt.want, string(got))
		})
	}
}

// TestBudget: Anthropic's limits on one request's strict tools; OpenAI
// has none.
func TestBudget(t *testing.T) {
	optional := strictschema.Make(strictschema.Anthropic, json.RawMessage(`{"type":"object","properties":{
		"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"},"e":{"type":"string"}}}`))
	require.True(t, optional.Strict, optional.Reason)
	require.Equal(t, 5, optional.Optional)
	b := strictschema.NewBudget(strictschema.Anthropic)
	for i := range 4 {
		ok, why := b.Take(optional)
		require.True(t, ok, "tool %d: %s", i, why)
	}
	ok, why := b.Take(optional)
	require.False(t, ok)
	require.Contains(t, why, "24 optional properties")

	plain := strictschema.Make(strictschema.Anthropic, json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`))
	b = strictschema.NewBudget(strictschema.Anthropic)
	for range strictschema.AnthropicMaxStrictTools {
		ok, _ := b.Take(plain)
		require.True(t, ok)
	}
	ok, why = b.Take(plain)
	require.False(t, ok)
	require.Contains(t, why, "at most 20 strict tools")

	o := strictschema.NewBudget(strictschema.OpenAI)
	for range 100 {
		ok, _ := o.Take(optional)
		require.True(t, ok)
	}
}

// FuzzMake: Make never panics, and what it sends strict is in the subset
// as written; Restore never panics and keeps JSON JSON.
func FuzzMake(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"string","minLength":1},"b":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/x"}]}},"$defs":{"x":{"type":"object","properties":{}}}}`, `{"a":null,"b":{"c":null}}`)
	f.Add(`{"type":"object","properties":{"p":{"type":"array","items":{"oneOf":[{"type":"object","properties":{"s":{"enum":["x"]}}}]}}}}`, `{"p":[{"s":"x"},null]}`)
	f.Add(`{"type":"object","properties":{"r":{"$ref":"#"}}}`, `{"r":{"r":{"r":null}}}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		for _, d := range []strictschema.Dialect{strictschema.OpenAI, strictschema.Anthropic} {
			r := strictschema.Make(d, json.RawMessage(schema))
			if r.Strict {
				require.NoError(t, strictschema.Check(d, r.Schema), "%s", r.Schema)
			} else {
				require.NotEmpty(t, r.Reason)
			}
		}
		out := strictschema.Restore(json.RawMessage(schema), json.RawMessage(args))
		if json.Valid([]byte(args)) {
			require.True(t, json.Valid(out), "%s", out)
		}
	})
}
