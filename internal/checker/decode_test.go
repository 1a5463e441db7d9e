package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeWrite: whatever a request carries, decoding it never panics,
// and a request it accepts names a key, with a delay within bounds.
func FuzzDecodeWrite(f *testing.F) {
	f.Add("", []byte(`{"key":"k","job":"j","delay_ms":400}`))
	f.Add("k", []byte(``))
	f.Add("k", []byte(`{"run":"r","i":3}`))
	f.Add(" ", []byte(`{"key":" "}`))
	f.Add("", []byte(`{"key":1}`))
	f.Add("k", []byte(`{"delay_ms":1e99}`))
	f.Add("k", []byte(`null`))
	f.Add("k", []byte(`[]`))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		req, err := decodeWrite(header, body)
		if err != nil {
			require.Equal(t, writeRequest{}, req)
			return
		}
		require.NotEmpty(t, req.key)
		require.Equal(t, strings.TrimSpace(req.key), req.key)
		require.GreaterOrEqual(t, req.delay, time.Duration(0))
		require.LessOrEqual(t, req.delay, maxDelay)
	})
}
