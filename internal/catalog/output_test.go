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
