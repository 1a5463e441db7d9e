package eventlog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzRestore: whatever state a Conversation's input carries (its JSON
// decoded as the SDK's default converter decodes it), Restore refuses it
// with CodeInvalid or makes a log that goes on from it — the offsets and
// the next index it gives, every item served — and that hands itself on
// again unchanged.
func FuzzRestore(f *testing.F) {
	good, err := conversationLog(3).Carry(CarryBytes)
	require.NoError(f, err)
	raw, err := json.Marshal(good)
	require.NoError(f, err)
	for _, s := range []string{
		string(raw), `{"log":[],"base_offset":0,"next_index":1}`, `{"log":null,"base_offset":12,"next_index":40}`,
		`{"log":[{"topic":"text","data":"ChYKCGVuY29kaW5nEgpqc29uL3BsYWluEgciaGVsbG8i","offset":0}],"base_offset":9007199254740992,"next_index":1}`,
		`{"log":[{"topic":"events","data":"","offset":3}],"next_index":2}`, `{}`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var s agent.StreamState
		if json.Unmarshal([]byte(raw), &s) != nil {
			return // the SDK refuses an input that does not decode
		}
		l, err := Restore(convID, s)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.Equal(t, s.BaseOffset+int64(len(s.Log)), l.Offset())
		require.Equal(t, s.NextIndex, l.Next())
		res, err := l.page(PollInput{})
		require.NoError(t, err)
		if !res.MoreReady {
			require.Len(t, res.Items, len(s.Log))
		}
		again, err := l.Carry(1 << 30)
		require.NoError(t, err)
		require.Equal(t, s.BaseOffset, again.BaseOffset)
		require.Equal(t, s.NextIndex, again.NextIndex)
		require.Len(t, again.Log, len(s.Log))
		back, err := Restore(convID, again)
		require.NoError(t, err)
		require.Equal(t, l.Offset(), back.Offset())
	})
}
