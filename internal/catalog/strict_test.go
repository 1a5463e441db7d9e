package catalog

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// TestSampleToolsStrict: the sample catalog's tools go to their agents'
// models strict, their schemas rewritten into OpenAI's subset, but for
// execute_pipeline, whose http_request step takes a free-form object
// (query parameters, or a JSON body), which strict mode cannot describe.
func TestSampleToolsStrict(t *testing.T) {
	cat, err := LoadFiles(kindsUnder(t, opening(t, "127.0.0.1:8089")), filepath.Join("..", "..", "catalog"))
	require.NoError(t, err)
	notStrict := map[string]string{}
	seen := 0
	for _, a := range cat.Tenants[0].Agents {
		schemas := make([]json.RawMessage, len(a.Tools))
		for i, tool := range a.Tools {
			schemas[i] = tool.Parameters
		}
		for i, r := range strictschema.Schemas(a.Model, schemas) {
			seen++
			if !r.Strict {
				notStrict[a.Tools[i].Name] = r.Reason
			}
		}
	}
	require.Greater(t, seen, 4)
	require.Equal(t, map[string]string{"execute_pipeline": "at /properties/pipeline/items/anyOf/0/properties/params: " +
		"an object without declared properties (a free-form map), which strict mode cannot describe"}, notStrict)
}
