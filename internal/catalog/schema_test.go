package catalog

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/temporaltool"
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
		"unknown field":           "tenant: demo\nagnets: []\n",
		"no tenant":               "agents: []\n",
		"model without provider":  "tenant: demo\nagents:\n  - id: a\n    model: gpt-4o\n",
		"rule without when":       "tenant: demo\nrules:\n  - name: r\n    agent: a\n",
		"bad limit":               "tenant: demo\nagents:\n  - id: a\n    model: openai:m\n    limits: {max_iterations: 0}\n",
		"allowed model bare":      "tenant: demo\nagents:\n  - id: a\n    model: openai:m\n    models_allowed: [gpt-4o]\n",
		"example without answer":  "tenant: demo\nagents:\n  - id: a\n    model: openai:m\n    examples: [{user: q}]\n",
		"tool guard without name": "tenant: demo\nagents:\n  - id: a\n    model: openai:m\n    guardrails: [{tool: {on: [input]}}]\n",
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

var update = flag.Bool("update", false, "rewrite the kinds' config schemas in catalog/schema.json")

// TestPublishedKindConfigs: catalog/schema.json publishes each built-in
// kind's config schema (the activity kind's too), as the loader checks it. Run with -update to
// rewrite that part of the file from the kinds.
func TestPublishedKindConfigs(t *testing.T) {
	path := filepath.Join("..", "..", "catalog", "schema.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	tool := doc["$defs"].(map[string]any)["tool"].(map[string]any)

	var want []any
	// The built-in kinds, and the activity kind every worker has (within
	// its operator's allow list).
	for _, k := range append(tools.Builtin(), temporaltool.Kinds(nil)...) {
		var config any = map[string]any{"not": map[string]any{}, "description": "this kind takes no config"}
		if len(k.Config) > 0 {
			require.NoError(t, json.Unmarshal(k.Config, &config))
		}
		want = append(want, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"kind": map[string]any{"const": k.Name}}, "required": []any{"kind"}},
			"then": map[string]any{"properties": map[string]any{"config": config}},
		})
	}
	if *update {
		tool["allOf"] = want
		out, err := json.MarshalIndent(doc, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
		return
	}
	require.Equal(t, want, tool["allOf"], "catalog/schema.json is behind the kinds: go test ./internal/catalog -run TestPublishedKindConfigs -update")
}
