package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testserver"
)

// TestRunOutputSchema: `starter run --output-schema` sends the turn's own
// schema, given as JSON or @file, and prints the answer as the object it
// matched; a schema that does not compile is refused before anything is
// started.
func TestRunOutputSchema(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: `
rules:
  - when: {user: 'weather'}
    reply: {text: '{"temp_c": 21, "sky": "clear"}'}
`, Catalogs: []string{`
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
`}})
	schema := `{"type":"object","properties":{"temp_c":{"type":"number"},"sky":{"type":"string"}},"required":["temp_c"]}`
	file := filepath.Join(t.TempDir(), "weather.json")
	require.NoError(t, os.WriteFile(file, []byte(schema), 0o600))

	for _, arg := range []string{schema, "@" + file} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		err := run(ctx, []string{"run", "--tenant", "demo", "--address", ts.Address, "--namespace", ts.Namespace,
			"--task-queue", ts.TaskQueue, "--output-schema", arg, "What is the weather?"}, &out)
		cancel()
		require.NoError(t, err, out.String())
		require.Contains(t, out.String(), `{"temp_c":21,"sky":"clear"}`+"\n")
	}
	reqs := ts.Model.Requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.Contains(t, string(r.ResponseFormat), `"json_schema"`)
	}

	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "--tenant", "demo", "--address", "127.0.0.1:1",
		"--output-schema", `{"type":"object","properties":{"n":{"type":"integr"}}}`, "hello"}, &out)
	require.ErrorContains(t, err, "output schema does not compile: /properties/n/type: ")
	err = run(context.Background(), []string{"run", "--tenant", "demo", "--address", "127.0.0.1:1",
		"--output-schema", "@" + filepath.Join(t.TempDir(), "none.json"), "hello"}, &out)
	require.ErrorContains(t, err, "read --output-schema")
}
