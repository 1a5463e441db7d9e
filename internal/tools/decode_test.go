package tools

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestDecodeArgs: a call's arguments and a spec's config are one JSON
// object of known fields; anything else is CodeInvalid and says what.
func TestDecodeArgs(t *testing.T) {
	type args struct {
		Query string `json:"query"`
	}
	for _, tc := range []struct {
		raw, err string
	}{
		{`{"query": "x"}`, ""},
		{` {"query": "x"} `, ""},
		{`{"query": "x", "limit": 3}`, `unknown field "limit"`},
		{`{"query": "x"} {"query": "y"}`, "more follows"},
		{`{"query": 1}`, "cannot unmarshal number"},
		{``, "EOF"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			var a args
			errs := []error{decodeArgs(json.RawMessage(tc.raw), &a, `{"query": "..."}`), decodeConfig(json.RawMessage(tc.raw), &a, "search")}
			for _, err := range errs {
				if tc.err == "" {
					require.NoError(t, err)
					require.Equal(t, "x", a.Query)
					continue
				}
				require.ErrorContains(t, err, tc.err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			}
		})
	}
}
