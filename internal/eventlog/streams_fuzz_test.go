package eventlog

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzStreamPoll: whatever a poll asks (its JSON decoded as the SDK's
// default converter decodes it), its page holds items of the topics asked
// for, in ascending offsets at or after the offset asked, within the
// stream; a page that was cut says where to go on, one that was not ends
// at the stream's end.
func FuzzStreamPoll(f *testing.F) {
	for _, s := range []string{
		`{"topics":[],"from_offset":0}`, `{"topics":["events"],"from_offset":3}`, `{"topics":["text"],"from_offset":1}`,
		`{"topics":null,"from_offset":9223372036854775807}`, `{"topics":["x","events"],"from_offset":-5}`, `{}`, `null`,
	} {
		f.Add(s)
	}
	l := logWithText()
	f.Fuzz(func(t *testing.T, raw string) {
		var in PollInput
		if json.Unmarshal([]byte(raw), &in) != nil || in.FromOffset < 0 {
			return // the SDK refuses what does not decode; a negative offset is TruncatedOffset
		}
		res, err := l.page(in)
		require.NoError(t, err)
		require.NotNil(t, res.Items)
		last := max(in.FromOffset, 0) - 1
		for _, it := range res.Items {
			require.Greater(t, it.Offset, last)
			require.Less(t, it.Offset, l.Offset())
			require.True(t, len(in.Topics) == 0 || slices.Contains(in.Topics, it.Topic), "topic %q", it.Topic)
			last = it.Offset
		}
		if res.MoreReady {
			require.Greater(t, res.NextOffset, last)
		} else {
			require.Equal(t, l.Offset(), res.NextOffset)
		}
	})
}
