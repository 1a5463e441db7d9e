package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutputSchema: an agent's output schema is compiled when the catalog
// is applied; one that does not compile is refused at its file and line
// (the line of the value the problem is about, when the compiler says),
// and a valid one is kept as JSON.
func TestOutputSchema(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    output_schema:\n"
	tests := []struct {
		name string
		src  string
		want []string // problems' prefixes; nil for a valid catalog
		json string
	}{
		{
			name: "valid",
			src:  head + "      type: object\n      properties:\n        city: {type: string}\n        nights: {type: integer, minimum: 1}\n      required: [city]\n",
			json: `{"type":"object","properties":{"city":{"type":"string"},"nights":{"type":"integer","minimum":1}},"required":["city"]}`,
		},
		{
			name: "a keyword's value is wrong",
			src:  head + "      type: object\n      properties:\n        city: {type: string}\n        nights:\n          type: integr\n",
			want: []string{`t.yaml:10: agents[0].output_schema.properties.nights.type: output schema does not compile: /properties/nights/type: `},
		},
		{
			name: "a dangling reference",
			src:  head + "      type: object\n      properties:\n        city: {$ref: '#/$defs/city'}\n",
			want: []string{`t.yaml:6: agents[0].output_schema: output schema does not compile: `},
		},
		{
			name: "a reference outside the schema",
			src:  head + "      type: object\n      properties:\n        city: {$ref: 'https://example.com/city.json'}\n",
			want: []string{`t.yaml:6: agents[0].output_schema: output schema does not compile: `},
		},
		{
			name: "not an object's schema",
			src:  head + "      type: array\n      items: {type: string}\n",
			want: []string{`t.yaml:6: agents[0].output_schema: output schema must describe a JSON object ("type": "object" at its root)`},
		},
		{
			name: "not a mapping",
			src:  head + "      - type: object\n",
			want: []string{`t.yaml:6: agents[0].output_schema: output schema must be a JSON Schema object`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				got := problems(t, tt.src)
				require.Len(t, got, len(tt.want), "%v", got)
				for i, w := range tt.want {
					require.Contains(t, got[i], w)
				}
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.JSONEq(t, tt.json, string(cat.Tenants[0].Agents[0].OutputSchema))
		})
	}
}

// TestInputSchema: an agent's input schema is compiled as its output
// schema is, its problems named so, and kept as JSON — every keyword of
// the 2020-12 vocabulary, as an MCP client reads it in tools/list.
func TestInputSchema(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    input_schema:\n"
	tests := []struct {
		name string
		src  string
		want []string // problems' prefixes; nil for a valid catalog
		json string
	}{
		{
			name: "no arguments",
			src:  head + "      type: object\n",
			json: `{"type":"object"}`,
		},
		{
			name: "2020-12 keywords",
			src: head + "      $schema: https://json-schema.org/draft/2020-12/schema\n      type: object\n" +
				"      $defs: {city: {$anchor: cityDef, type: string}}\n      properties: {to: {$ref: '#/$defs/city'}, by: {enum: [train, plane]}}\n" +
				"      if: {properties: {by: {const: plane}}, required: [by]}\n      then: {required: [to]}\n      additionalProperties: false\n",
			json: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"city":{"$anchor":"cityDef","type":"string"}},` +
				`"properties":{"to":{"$ref":"#/$defs/city"},"by":{"enum":["train","plane"]}},"if":{"properties":{"by":{"const":"plane"}},"required":["by"]},` +
				`"then":{"required":["to"]},"additionalProperties":false}`,
		},
		{
			name: "a keyword's value is wrong",
			src:  head + "      type: object\n      properties:\n        n:\n          type: integr\n",
			want: []string{`t.yaml:9: agents[0].input_schema.properties.n.type: input schema does not compile: /properties/n/type: `},
		},
		{
			name: "not an object's schema",
			src:  head + "      type: string\n",
			want: []string{`t.yaml:6: agents[0].input_schema: input schema must describe a JSON object ("type": "object" at its root)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				got := problems(t, tt.src)
				require.Len(t, got, len(tt.want), "%v", got)
				for i, w := range tt.want {
					require.Contains(t, got[i], w)
				}
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.JSONEq(t, tt.json, string(cat.Tenants[0].Agents[0].InputSchema))
		})
	}
}
