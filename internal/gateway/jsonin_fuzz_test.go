package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzBodyObject: any request body is one JSON object's members, or an
// invalid-request error in the door's words, never a panic; the members
// of an accepted body are the object's.
func FuzzBodyObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null]}`, ``, `  `, `[1]`, `"x"`, `{"a":1}{"b":2}`, `{"a":`, `null`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := BodyObject(data, "empty body", "not an object")
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		var again map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &again))
		require.Len(t, fields, len(again))
	})
}
