package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolveInput(t *testing.T) {
	prev := []PreviousResult{
		{NodeID: "fetch", ResultRef: "artifact://7f0c2f9e-8a51-4d0e-9a3b-1c2d3e4f5a6b"},
		{NodeID: "chart", ResultRef: CASRefPrefix + strings.Repeat("ab", 32)},
	}
	for _, tc := range []struct {
		ref, want, err string
		prev           []PreviousResult
	}{
		{ref: CASRefPrefix + strings.Repeat("0", 64), want: CASRefPrefix + strings.Repeat("0", 64), prev: prev},
		{ref: "previous_results[0]", want: prev[0].ResultRef, prev: prev},
		{ref: "previous_results[1]", want: prev[1].ResultRef, prev: prev},
		{ref: "previous_results[1].result_ref", want: prev[1].ResultRef, prev: prev},
		{ref: "previous_results[2]", prev: prev, err: "out of range: this turn was given 2 previous results, previous_results[0] to previous_results[1]"},
		{ref: "previous_results[999999999]", prev: prev, err: "out of range"},
		{ref: "previous_results[0]", err: "this turn was given no previous results"},
		{ref: "previous_results[-1]", prev: prev, err: "want previous_results[i]"},
		{ref: "previous_results[01]", prev: prev, err: "want previous_results[i]"},
		{ref: "previous_results[]", prev: prev, err: "want previous_results[i]"},
		{ref: "previous_results[0", prev: prev, err: "want previous_results[i]"},
		{ref: "previous_results[0].node_id", prev: prev, err: "want previous_results[i]"},
		{ref: "previous_results[1234567890]", prev: prev, err: "want previous_results[i]"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := ResolveInput(tc.ref, tc.prev)
			if tc.err != "" {
				requireInvalid(t, err)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// FuzzResolveInput: a ref a model wrote is itself, one of the turn's
// previous results, or a CodeInvalid error; never anything else.
func FuzzResolveInput(f *testing.F) {
	for _, s := range []string{"previous_results[0]", "previous_results[1].result_ref", "previous_results[7]", "previous_results[x]",
		"previous_results[", "cas://sha256:00", "artifact://x", "", "previous_results[00]", "previous_results[0]]"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, ref string, n int) {
		n = max(0, min(n, MaxPreviousResults))
		prev := make([]PreviousResult, n)
		for i := range prev {
			prev[i] = PreviousResult{NodeID: "n", ResultRef: ArtifactRefPrefix + string(rune('a'+i%26))}
		}
		got, err := ResolveInput(ref, prev)
		switch {
		case err != nil:
			requireInvalid(t, err)
			require.True(t, IsInputIndex(ref))
		case IsInputIndex(ref):
			require.Contains(t, prev, PreviousResult{NodeID: "n", ResultRef: got})
		default:
			require.Equal(t, ref, got)
		}
	})
}
