package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestPublishedSchema checks catalog/schema.json against the sample
// catalog and against documents the loader refuses for their shape.
func TestPublishedSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("..", "..", "catalog", "schema.json"))
	require.NoError(t, err)
	validate := func(src string) error {
		var doc any
		require.NoError(t, yaml.Unmarshal([]byte(src), &doc))
		return sch.Validate(doc)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "catalog", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, validate(string(data)), f)
		_, err = Parse(nil, f, data)
		require.NotContains(t, errString(err), "unknown field", "the loader and the schema agree on fields")
	}
	for name, src := range map[string]string{
		"unknown field":          "tenant: demo\nagnets: []\n",
		"no tenant":              "agents: []\n",
		"model without provider": "tenant: demo\nagents:\n  - id: a\n    model: gpt-4o\n",
		"rule without when":      "tenant: demo\nrules:\n  - name: r\n    agent: a\n",
		"bad limit":              "tenant: demo\nagents:\n  - id: a\n    model: openai:m\n    limits: {max_iterations: 0}\n",
	} {
		require.Error(t, validate(src), name)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return strings.ToLower(err.Error())
}
