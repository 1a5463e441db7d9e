package catalog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/tools"
)

// FuzzParse feeds the catalog loader arbitrary documents: it must answer
// every one with a catalog or an error that says what is wrong, never a
// panic, and a catalog it accepts must be one it accepts again.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "catalog", "*.yaml"))
	require.NoError(f, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte("tenant: demo\ntools:\n  - name: t\n    kind: execute_pipeline\n    config: {cache_ttl_sec: 5}\n"))
	f.Add([]byte("tenant: demo\negress: [\"*.example.com\", \"10.0.0.0/8\"]\ntoolkits:\n  - name: k\n    tools: [a]\n"))
	f.Add([]byte("tenant: [\n"))
	f.Add([]byte("tenant: demo\nretention: {blobs: 30d, results: 36h, transcripts: 1m}\n"))
	f.Add([]byte("tenant: demo\nmodel_limits:\n  openai: requests:100/1m,concurrent:4\n  'anthropic:claude': input_tokens:5/1s\n"))
	f.Add([]byte("tenant: demo\ntools:\n  - {name: c, kind: calculator, parameters: {type: object}}\n  - {name: m, kind: mcp, config: {url: 'https://m.example/mcp'}}\n" +
		"agents:\n  - id: a\n    model: openai:m\n    guardrails: [{tool: {name: c, on: [input]}}, {tool: {name: m_check, fail: open}}]\n"))
	f.Add([]byte("tenant: demo\nprices:\n  - {model: 'openai:m', input: 0.5, output: 2, cached_input: 0.1}\nbudgets: {day: {tokens: 10}, month: {cost: 1.5}}\n"))
	kinds, err := tools.NewRegistry(tools.Deps{}, tools.Builtin()...)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		cat, err := Parse(kinds, "f.yaml", data)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		_, err = Parse(kinds, "f.yaml", data)
		require.NoError(t, err)
		for _, tc := range cat.Tenants {
			require.NotEmpty(t, tc.TenantID)
		}
	})
}
