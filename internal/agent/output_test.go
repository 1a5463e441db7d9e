package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckOutputSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"none", ``, ""},
		{"null", `null`, ""},
		{"an object's", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"an array's", `{"type":"array"}`, `must describe a JSON object ("type": "object" at its root)`},
		{"no type", `{"properties":{}}`, `must describe a JSON object`},
		{"types", `{"type":["object","null"]}`, `must describe a JSON object`},
		{"not an object", `"object"`, "must be a JSON Schema object"},
		{"too large", `{"type":"object","description":"` + strings.Repeat("x", MaxOutputSchemaBytes) + `"}`, "the limit is 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputSchema(json.RawMessage(tc.schema))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, IsCode(err, CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestOutputSchemaOf: a request's schema takes the place of its agent's;
// null is none.
func TestOutputSchemaOf(t *testing.T) {
	own, agents := json.RawMessage(`{"type":"object","title":"own"}`), json.RawMessage(`{"type":"object","title":"agent's"}`)
	require.Equal(t, own, TurnRequest{OutputSchema: own}.OutputSchemaOf(Agent{OutputSchema: agents}))
	require.Equal(t, agents, TurnRequest{}.OutputSchemaOf(Agent{OutputSchema: agents}))
	require.Equal(t, agents, TurnRequest{OutputSchema: json.RawMessage(`null`)}.OutputSchemaOf(Agent{OutputSchema: agents}))
	require.Nil(t, TurnRequest{}.OutputSchemaOf(Agent{}))

	r := TurnRequest{TenantID: "demo", Prompt: "hi", OutputSchema: json.RawMessage(`null`)}
	h := r.Hash()
	r.Normalize()
	require.Nil(t, r.OutputSchema)
	require.Equal(t, TurnRequest{TenantID: "demo", Prompt: "hi"}.Hash(), h, "null names the same request as none")
}
