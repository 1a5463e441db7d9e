package strictschema_test

import (
	"encoding/json"
	"testing"

	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// FuzzRestore: whatever a model writes and whatever schema a tool has,
// Restore does not panic, and arguments that are JSON stay JSON.
func FuzzRestore(f *testing.F) {
	f.Add(`{"type":"object","properties":{"q":{"type":"string"},"state":{"type":"string"}},"required":["q"]}`, `{"q":"SSO","state":null}`)
	f.Add(`{"type":"object","properties":{"a":{"type":["integer","null"]}}}`, `{"a":null}`)
	f.Add(`{"$defs":{"x":{"type":"object","properties":{"n":{"type":"string"}}}},"type":"object","properties":{"x":{"$ref":"#/$defs/x"}}}`, `{"x":{"n":null}}`)
	f.Add(`not json`, `{"a":null}`)
	f.Add(`{}`, `null`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		out := strictschema.Restore(json.RawMessage(schema), json.RawMessage(args))
		if json.Valid([]byte(args)) && !json.Valid(out) {
			t.Fatalf("Restore(%s, %s) = %s: not JSON", schema, args, out)
		}
	})
}
