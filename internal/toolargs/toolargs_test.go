package toolargs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestCheck(t *testing.T) {
	params := []byte(`{"type":"object","properties":{"order_id":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["order_id"],"additionalProperties":false}`)
	for _, tc := range []struct{ name, args, err string }{
		{name: "fits", args: `{"order_id":"A17","qty":2}`},
		{name: "missing", args: `{"qty":2}`, err: "missing property 'order_id'"},
		{name: "wrong type", args: `{"order_id":17}`, err: "/order_id: got number, want string"},
		{name: "below minimum", args: `{"order_id":"A","qty":0}`, err: "/qty: minimum: got 0, want 1"},
		{name: "extra", args: `{"order_id":"A","note":"x"}`, err: "additional properties 'note' not allowed"},
		{name: "not JSON", args: `{"order_id":`, err: "arguments are not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(params, tc.args)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid))
		})
	}
	require.NoError(t, Check(nil, `{}`), "no parameters: any object")
	require.ErrorContains(t, Check([]byte(`{"type":"nope"}`), `{}`), "the tool's parameters")
}

func FuzzCheck(f *testing.F) {
	params := []byte(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)
	for _, s := range []string{`{"order_id":"A"}`, `{}`, `[]`, `"x"`, `{"order_id":{"a":[1,2]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		_ = Check(params, args) // never panics
	})
}
