package egress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParsePolicy: any allowlist is a policy or an error naming the
// entry, never a panic.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com", "127.0.0.1:8089", "10.0.0.0/8", "[::1]:80", "", "http://x", "*.", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entries string) {
		list := strings.Split(entries, ",")
		_, err := ParsePolicy(list)
		if err != nil {
			require.NotEmpty(t, err.Error())
		}
	})
}
