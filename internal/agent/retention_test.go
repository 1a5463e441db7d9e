package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const day = 24 * time.Hour

func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "30d": 30 * day, "36h": 36 * time.Hour, "1m": time.Minute, "36500d": MaxRetention} {
		got, err := ParseTTL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"0", "0d", "59s", "-1d", "1.5d", "d", "30 d", "36501d", "9223372036854775807d", "forever", "1y"} {
		_, err := ParseTTL(in)
		require.True(t, IsCode(err, CodeInvalid), "%q: %v", in, err)
	}
}

// FuzzParseTTL: every string is a TTL within bounds or an invalid-input
// error, never a panic or an out-of-range duration.
func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"30d", "36h", "1m", "", "-1d", "99999999999999999999d", "1h30m", "0x1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTTL(s)
		if err != nil {
			require.True(t, IsCode(err, CodeInvalid), "%q: %v", s, err)
			require.LessOrEqual(t, len(err.Error()), 300, "the input is quoted short")
			return
		}
		require.True(t, d == 0 && s == "" || d >= time.Minute && d <= MaxRetention, "%q: %s", s, d)
	})
}

func TestRetentionNarrows(t *testing.T) {
	op := Retention{Results: 30 * day, Transcripts: 7 * day}
	require.NoError(t, Retention{Results: 30 * day, Transcripts: day, Blobs: 400 * day}.Narrows(op))
	require.NoError(t, Retention{Results: 1 * day, Transcripts: day}.Narrows(Retention{}), "an operator that keeps everything allows any TTL")
	err := Retention{Results: 31 * day, Transcripts: day}.Narrows(op)
	require.EqualError(t, err, "retention.results: 31d is longer than the operator's 30d; a tenant may only shorten it")
	require.NoError(t, Retention{Results: day}.Narrows(op), "a TTL left out is the operator's")
	err = Retention{Transcripts: 8 * day}.Narrows(op)
	require.EqualError(t, err, "retention.transcripts: 8d is longer than the operator's 7d; a tenant may only shorten it")

	require.Equal(t, Retention{Results: day, Transcripts: 7 * day, Blobs: 2 * day},
		Retention{Results: day, Blobs: 2 * day}.Within(op))
	require.True(t, Retention{}.Within(Retention{}).IsZero())
}
