package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefuseTaskNameMismatch: a Tasks request whose Mcp-Name header names
// another task than its body is refused, 400 and -32020; the rest go on
// to the SDK with their bodies whole.
func TestRefuseTaskNameMismatch(t *testing.T) {
	for _, tc := range []struct {
		name, header, body string
		refused            bool
	}{
		{"mismatched", "turn/demo/b", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"turn/demo/a"}}`, true},
		{"mismatched cancel", "x", `{"jsonrpc":"2.0","id":"c","method":"tasks/cancel","params":{"taskId":"turn/demo/a"}}`, true},
		{"matched", "turn/demo/a", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"turn/demo/a"}}`, false},
		{"no header", "", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"turn/demo/a"}}`, false},
		{"another method", "greet", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"other"}}`, false},
		{"not JSON", "x", `{"jsonrpc":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, MCPPath, strings.NewReader(tc.body))
			if tc.header != "" {
				r.Header.Set("Mcp-Name", tc.header)
			}
			w := httptest.NewRecorder()
			require.Equal(t, tc.refused, refuseTaskNameMismatch(w, r))
			if !tc.refused {
				body, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				require.Equal(t, tc.body, string(body), "the body goes on whole")
				return
			}
			require.Equal(t, http.StatusBadRequest, w.Code)
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp), w.Body.String())
			require.Equal(t, -32020, resp.Error.Code)
			require.Contains(t, resp.Error.Message, "does not match body value")
			require.Contains(t, tc.body, `"id":`+string(resp.ID))
		})
	}
}

// FuzzRefuseTaskNameMismatch: any body, with any header, is refused with
// a JSON-RPC error or left whole; never a panic.
func FuzzRefuseTaskNameMismatch(f *testing.F) {
	f.Add("a", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"b"}}`)
	f.Add("a", `{"method":"tasks/update","params":{"taskId":1}}`)
	f.Add("a", `[]`)
	f.Fuzz(func(t *testing.T, header, body string) {
		r := httptest.NewRequest(http.MethodPost, MCPPath, strings.NewReader(body))
		r.Header.Set("Mcp-Name", header)
		w := httptest.NewRecorder()
		if !refuseTaskNameMismatch(w, r) {
			rest, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			require.Equal(t, body, string(rest))
			return
		}
		require.Equal(t, http.StatusBadRequest, w.Code)
		require.True(t, json.Valid(w.Body.Bytes()), w.Body.String())
	})
}
