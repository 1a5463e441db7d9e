package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzMCPInput: any arguments of an MCP tools/call are a prompt that is
// not blank, or an error that says what is wrong; never a panic.
func FuzzMCPInput(f *testing.F) {
	for _, s := range []string{`{"prompt":"What is 2+2?"}`, `{"prompt":""}`, `{"prompt":3}`, `{"prompt":"a","x":1}`,
		`{}`, `[]`, `null`, ``, `{"prompt":"a"} {"prompt":"b"}`, `{"prompt":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeMCPInput(json.RawMessage(raw))
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, strings.TrimSpace(in.Prompt))
	})
}
