package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
	"github.com/stretchr/testify/require"
)

const strictScript = `
rules:
  - when: {user: 'find'}
    reply: {tool_calls: [{name: find, arguments: '{"q": "flights", "page": {"size": 5}}'}]}
  - when: {}
    reply: {text: ok}
`

// findTool is a strict OpenAI tool with schema.
func findTool(schema string) string {
	return `[{"type":"function","function":{"name":"find","strict":true,"parameters":` + schema + `}}]`
}

// TestStrictSchemasOpenAI: a strict tool's schema outside OpenAI's strict
// subset refuses the request with a 400 naming the place; one inside it
// is recorded as strict, and the call is written as a strict model
// writes it: every property, null where the script leaves a nullable one
// out, in nested objects too.
func TestStrictSchemasOpenAI(t *testing.T) {
	srv := start(t, strictScript)
	strict := `{"type":"object","additionalProperties":false,"required":["q","limit","page"],"properties":{
		"q":{"type":"string"},"limit":{"type":["integer","null"],"minimum":1},
		"page":{"type":"object","additionalProperties":false,"required":["size","after"],"properties":{"size":{"type":"integer"},"after":{"anyOf":[{"type":"string"},{"type":"null"}]}}}}}`
	for _, tt := range []struct {
		name, schema, refused string
	}{
		{name: "an optional property", schema: `{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string"}}}`,
			refused: `Invalid schema for function 'find': 'required' is required to be supplied and to be an array including every key in properties. Missing \"q\"`},
		{name: "an open object", schema: `{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`,
			refused: `'additionalProperties' is required to be supplied and to be false`},
		{name: "a keyword", schema: `{"type":"object","additionalProperties":false,"required":["q"],"properties":{"q":{"type":"string","minLength":1}}}`,
			refused: `/properties/q: \"minLength\" is not permitted`},
		{name: "a free-form object", schema: `{"type":"object","additionalProperties":false,"required":["p"],"properties":{"p":{"type":"object","additionalProperties":false}}}`,
			refused: `/properties/p: an object must declare its properties`},
		{name: "strict", schema: strict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv, `{"model":"m","messages":[{"role":"user","content":"find"}],"tools":`+findTool(tt.schema)+`}`)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if tt.refused != "" {
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				require.Contains(t, string(body), tt.refused)
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			var out struct {
				Choices []struct {
					Message struct {
						ToolCalls []wireToolCall `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(body, &out))
			require.JSONEq(t, `{"q":"flights","limit":null,"page":{"size":5,"after":null}}`, out.Choices[0].Message.ToolCalls[0].Function.Arguments)
			reqs := srv.Requests()
			require.Equal(t, []string{"find"}, reqs[len(reqs)-1].StrictTools)
		})
	}
	// Not strict: sent as the script writes it.
	resp := post(t, srv, `{"model":"m","messages":[{"role":"user","content":"find"}],"tools":[{"type":"function","function":{"name":"find","parameters":`+strict+`}}]}`)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `"arguments":"{\"q\": \"flights\", \"page\": {\"size\": 5}}"`)
}

// TestStrictSchemasAnthropic: Anthropic's strict subset through its own
// SDK: optional properties are fine, numeric bounds and open objects are
// refused.
func TestStrictSchemasAnthropic(t *testing.T) {
	srv := start(t, strictScript)
	c := anthropicClient(srv)
	tool := func(props map[string]any, extra map[string]any) []anthropic.ToolUnionParam {
		tp := anthropic.ToolParam{Name: "find", Strict: param.NewOpt(true),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: props, Required: []string{"q"}, ExtraFields: extra}}
		return []anthropic.ToolUnionParam{{OfTool: &tp}}
	}
	closed := map[string]any{"additionalProperties": false}
	params := userParams(anthropic.NewTextBlock("hello"))

	params.Tools = tool(map[string]any{"q": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}, closed)
	_, err := ask(t, c, params, false)
	require.NoError(t, err, "an optional property is fine")
	reqs := srv.Requests()
	require.Equal(t, []string{"find"}, reqs[len(reqs)-1].StrictTools)

	params.Tools = tool(map[string]any{"q": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer", "minimum": 1}}, closed)
	_, err = ask(t, c, params, false)
	require.ErrorContains(t, err, `/properties/limit: \"minimum\" is not permitted`)

	params.Tools = tool(map[string]any{"q": map[string]any{"type": "string"}}, nil)
	_, err = ask(t, c, params, false)
	require.ErrorContains(t, err, `'additionalProperties' is required to be supplied and to be false`)
}
