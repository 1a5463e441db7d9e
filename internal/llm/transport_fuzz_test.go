package llm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDoneWatcher: whatever a provider streams, and however the reads
// split it, the watcher passes every byte through unchanged and notes
// the end of the stream exactly when "[DONE]" went by.
func FuzzDoneWatcher(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
		"data: [DO", "[DONE]", "[[DONE]", "DONE]", "",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, body []byte, chunk uint8) {
		st := &callState{watchDone: true}
		w := &doneWatcher{ReadCloser: io.NopCloser(&smallReads{r: bytes.NewReader(body), n: int(chunk)%16 + 1}), st: st}
		got, err := io.ReadAll(w)
		require.NoError(t, err)
		require.Equal(t, body, got)
		require.Equal(t, bytes.Contains(body, doneMarker), st.snapshot().sawDone)
	})
}

// smallReads returns at most n bytes per Read, as a network does.
type smallReads struct {
	r io.Reader
	n int
}

func (s *smallReads) Read(p []byte) (int, error) {
	if len(p) > s.n {
		p = p[:s.n]
	}
	return s.r.Read(p)
}

// FuzzParseRetryAfter: a provider's Retry-After header becomes a delay
// that is never negative: Temporal waits it before the next attempt.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"7", "0.5", "0", "-3", "", " 12 ", "Wed, 21 Oct 2015 07:28:00 GMT",
		"Fri, 01 Jan 2100 00:00:00 GMT", "1e300", "NaN", "+Inf", "soon"} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		require.GreaterOrEqual(t, parseRetryAfter(v, now), time.Duration(0), "Retry-After %q", v)
	})
}
