package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestModelLimitsNarrows: a tenant's limit narrows the operator's when
// it lets no more through in any of the operator's windows; a limit
// either leaves out is no bound on the other.
func TestModelLimitsNarrows(t *testing.T) {
	op := ModelLimits{Requests: 100, RequestWindow: time.Minute, InputTokens: 1000, InputWindow: time.Minute, Concurrent: 4}
	for _, tc := range []struct {
		own  string
		want string // "" narrows
	}{
		{"requests:100/1m", ""},
		{"requests:100/2m", ""},
		{"requests:50/30s", ""}, // twice in a minute: 100
		{"requests:33/20s", ""}, // three times: 99
		{"requests:34/20s", `requests: 34/20s allows more than the operator's 100/1m; a tenant may only narrow it`},
		{"requests:51/30s", `requests: 51/30s allows more`},
		{"requests:101/1h", `requests: 101/1h allows more`},
		{"requests:40/25s", `requests: 40/25s allows more`}, // three windows overlap a minute: 120
		{"concurrent:4", ""},
		{"concurrent:5", `concurrent: 5 allows more than the operator's 4`},
		{"output_tokens:1000000", ""}, // the operator has no output limit
		{"input_tokens:1000/1m,requests:1", ""},
		{"input_tokens:1001/1m", `input_tokens: 1001/1m allows more`},
	} {
		own, err := ParseModelLimits(tc.own)
		require.NoError(t, err, tc.own)
		err = own.Narrows(op)
		if tc.want == "" {
			require.NoError(t, err, tc.own)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.own)
		require.True(t, IsCode(err, CodeInvalid))
	}
	require.NoError(t, ModelLimits{Requests: 1_000_000_000_000, RequestWindow: time.Second}.Narrows(ModelLimits{}), "the operator governs nothing")
}
