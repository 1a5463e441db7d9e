package gateway

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestStreamSlots(t *testing.T) {
	l := newStreamSlots(2)
	r1, err := l.take("demo")
	require.NoError(t, err)
	r2, err := l.take("demo")
	require.NoError(t, err)
	_, err = l.take("demo")
	require.True(t, agent.IsCode(err, agent.CodeRateLimited), "%v", err)
	require.Contains(t, err.Error(), "AGENTFLOW_MAX_STREAMS_PER_TENANT")
	_, err = l.take("rival")
	require.NoError(t, err, "each tenant has its own")
	r1()
	r1() // again: nothing
	r3, err := l.take("demo")
	require.NoError(t, err)
	r2()
	r3()
	require.Equal(t, map[string]int{"rival": 1}, l.open)
}

func TestResumeIndex(t *testing.T) {
	tests := []struct {
		name    string
		header  []string
		query   string
		after   int64
		ok      bool
		problem string
	}{
		{"none", nil, "", 0, false, ""},
		{"the header", []string{"42"}, "", 42, true, ""},
		{"the query", nil, "after_index=7", 7, true, ""},
		{"the header wins over the URL it reconnects to", []string{"42"}, "after_index=7", 42, true, ""},
		{"an empty header is none", []string{""}, "after_index=7", 7, true, ""},
		{"zero", []string{"0"}, "", 0, true, ""},
		{"the largest", []string{"9223372036854775807"}, "", 1<<63 - 1, true, ""},
		{"not a number", []string{"abc"}, "", 0, false, `Last-Event-ID "abc" is not an event index`},
		{"negative", []string{"-1"}, "", 0, false, `Last-Event-ID "-1" is not an event index`},
		{"signed", []string{"+1"}, "", 0, false, "is not an event index"},
		{"spaced", []string{" 1"}, "", 0, false, "is not an event index"},
		{"too large", []string{"9223372036854775808"}, "", 0, false, "is not an event index"},
		{"twice", []string{"1", "2"}, "", 0, false, "Last-Event-ID is given 2 times"},
		{"a bad query", nil, "after_index=x", 0, false, `after_index "x" is not an event index`},
		{"a query twice", nil, "after_index=1&after_index=2", 0, false, "after_index is given 2 times"},
		{"an unknown parameter", nil, "last_event=3", 0, false, `unknown query parameter "last_event"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			after, ok, err := ResumeIndex(tt.header, q)
			if tt.problem != "" {
				require.ErrorContains(t, err, tt.problem)
				require.True(t, agent.IsCode(err, agent.CodeInvalid))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.after, after)
			require.Equal(t, tt.ok, ok)
		})
	}
}

// FuzzResumeIndex: any Last-Event-ID and query is an index of 0 or more,
// written as the stream writes ids, or CodeInvalid; never a panic.
func FuzzResumeIndex(f *testing.F) {
	for _, s := range [][2]string{{"42", ""}, {"", "after_index=3"}, {"x", "after_index=1"}, {"", "a=1&after_index=2&after_index=3"}, {"007", "%zz"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, header, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		after, ok, err := ResumeIndex([]string{header}, q)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.LessOrEqual(t, len(err.Error()), 200, "a bounded message")
			return
		}
		require.GreaterOrEqual(t, after, int64(0))
		if header != "" {
			require.True(t, ok)
			n, perr := strconv.ParseInt(header, 10, 64)
			require.NoError(t, perr)
			require.Equal(t, n, after)
		}
	})
}
