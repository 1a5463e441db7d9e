package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, stream string) ([]Event, *Reader) {
	t.Helper()
	rd := NewReader(strings.NewReader(stream))
	var evs []Event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs, rd
		}
		require.NoError(t, err)
		evs = append(evs, ev)
	}
}

// TestReaderStandardExamples: the examples of the standard's section,
// read as it says they are.
func TestReaderStandardExamples(t *testing.T) {
	tests := []struct {
		name, stream string
		want         []Event
	}{
		{"stock ticker", "data: YHOO\ndata: +2\ndata: 10\n\n", []Event{{Type: "message", Data: "YHOO\n+2\n10"}}},
		{"four blocks", ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n",
			// The third has no blank line after it: discarded.
			[]Event{{ID: "1", Type: "message", Data: "first event"}, {ID: "", Type: "message", Data: "second event"}}},
		{"empty data", "data\n\ndata\ndata\n\ndata:\n", []Event{{Type: "message", Data: ""}, {Type: "message", Data: "\n"}}},
		{"a space after the colon is dropped once", "data:test\n\ndata: test\n\ndata:  test\n\n",
			[]Event{{Type: "message", Data: "test"}, {Type: "message", Data: "test"}, {Type: "message", Data: " test"}}},
		{"typed, with CR and CRLF line ends", "event: add\rdata: 73857293\r\n\r\nevent: remove\ndata: 2153\n\n",
			[]Event{{Type: "add", Data: "73857293"}, {Type: "remove", Data: "2153"}}},
		{"an id with NULL is ignored; the id persists", "id: 7\ndata: a\n\nid: 8\x00\ndata: b\n\n",
			[]Event{{ID: "7", Type: "message", Data: "a"}, {ID: "7", Type: "message", Data: "b"}}},
		{"a byte order mark is dropped", "\uFEFFdata: x\n\n", []Event{{Type: "message", Data: "x"}}},
		{"no data, no event; the type does not carry over", "event: lone\n\ndata: y\n\n", []Event{{Type: "message", Data: "y"}}},
		{"unknown fields are ignored", "foo: bar\ndata: z\n\n", []Event{{Type: "message", Data: "z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := readAll(t, tt.stream)
			require.Equal(t, tt.want, got)
		})
	}

	_, rd := readAll(t, "retry: 1500\ndata: x\n\nretry: 2s\n\n")
	require.Equal(t, 1500, rd.Retry, "a retry that is not digits is ignored")
	_, rd = readAll(t, "id: 42\n\n")
	require.Equal(t, "42", rd.LastEventID(), "an id is kept without data")
}

func TestWriteEvent(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteEvent(&b, "3", "token", []byte(`{"text":"hi"}`)))
	require.NoError(t, WriteComment(&b, "keep\nalive"))
	require.NoError(t, WriteEvent(&b, "", "", []byte("two\r\nlines")))
	require.Equal(t, "id: 3\nevent: token\ndata: {\"text\":\"hi\"}\n\n: keep alive\n\ndata: two\ndata: lines\n\n", b.String())
	require.Error(t, WriteEvent(&b, "1\n2", "x", nil))
	require.Error(t, WriteEvent(&b, "1", "x\ry", nil))
}

// TestWriteRetry: the reconnection time a reader takes from the stream.
func TestWriteRetry(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteEvent(&b, "7", "token", []byte("x")))
	require.NoError(t, WriteRetry(&b, 1500*time.Millisecond))
	require.Equal(t, "id: 7\nevent: token\ndata: x\n\nretry: 1500\n\n", b.String())
	rd := NewReader(&b)
	_, err := rd.Next()
	require.NoError(t, err)
	_, err = rd.Next()
	require.ErrorIs(t, err, io.EOF, "a retry dispatches no event")
	require.Equal(t, 1500, rd.Retry)
	require.Equal(t, "7", rd.LastEventID())
}

// FuzzRoundTrip: an event written is read back as written, whatever its
// data, and a reader never panics on what follows it.
func FuzzRoundTrip(f *testing.F) {
	f.Add("1", "token", `{"text":"hi"}`, "garbage:\r\n")
	f.Add("", "", "a\r\nb\rc\nd", "\uFEFF")
	f.Add("x", "status", "", ":comment\n\n")
	f.Fuzz(func(t *testing.T, id, typ, data, tail string) {
		var b bytes.Buffer
		if err := WriteEvent(&b, id, typ, []byte(data)); err != nil {
			require.True(t, strings.ContainsAny(id+typ, "\r\n\x00"))
			return
		}
		rd := NewReader(io.MultiReader(&b, strings.NewReader(tail)))
		ev, err := rd.Next()
		require.NoError(t, err)
		want := Event{ID: id, Type: typ, Data: strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(data)}
		if want.Type == "" {
			want.Type = "message"
		}
		want.Type, want.Data, want.ID = strings.ToValidUTF8(want.Type, "\uFFFD"), strings.ToValidUTF8(want.Data, "\uFFFD"), strings.ToValidUTF8(want.ID, "\uFFFD")
		if strings.HasPrefix(id, "\uFEFF") {
			return // the stream's first bytes: a byte order mark, dropped
		}
		require.Equal(t, want, ev)
		for {
			if _, err := rd.Next(); err != nil {
				return
			}
		}
	})
}
