package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChunkerToolCalls: langchaingo's JSON tool-call deltas become named
// deltas, assembled the way langchaingo assembles the reply's calls.
func TestChunkerToolCalls(t *testing.T) {
	var got []Chunk
	c := &chunker{st: &callState{}, req: Request{OnChunk: func(_ context.Context, ch Chunk) error {
		got = append(got, ch)
		return nil
	}}}
	ctx := context.Background()
	for _, chunk := range []string{
		`[{"type":"","function":{"name":"","arguments":"{\"lost"}}]`, // before any call: langchaingo drops it too
		`[{"id":"call_9","type":"function","function":{"name":"weather","arguments":""}}]`,
		`[{"type":"","function":{"name":"","arguments":"{\"city\":"}}]`,
		`[{"type":"","function":{"name":"","arguments":"\"Bern\"}"}}]`,
		`[{"type":"function","function":{"name":"clock","arguments":"{}"}}]`, // no id: named as toResponse names it
		`[{"function":{"name":"x"},"type":"function"}]`,                      // not langchaingo's encoding: neither text nor a call
		`[1, 2]`, // text
	} {
		require.NoError(t, c.text(ctx, []byte(chunk)))
	}
	require.Equal(t, []Chunk{
		{Kind: ChunkToolCall, ToolCall: ToolCallDelta{Index: 0, ID: "call_9", Name: "weather"}},
		{Kind: ChunkToolCall, ToolCall: ToolCallDelta{Index: 0, ID: "call_9", Name: "weather", Args: `{"city":`}},
		{Kind: ChunkToolCall, ToolCall: ToolCallDelta{Index: 0, ID: "call_9", Name: "weather", Args: `"Bern"}`}},
		{Kind: ChunkToolCall, ToolCall: ToolCallDelta{Index: 1, ID: "call_1", Name: "clock", Args: `{}`}},
		{Kind: ChunkText, Text: `[1, 2]`},
	}, got)
}

func TestAliasReasoning(t *testing.T) {
	tests := []struct {
		name, in, member string
		want             string // "" = unchanged
	}{
		{"delta", `{"choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`, "delta",
			`{"choices":[{"index":0,"delta":{"reasoning":"hm","reasoning_content":"hm"}}]}`},
		{"message", `{"id":"c","choices":[{"message":{"role":"assistant","content":"4","reasoning":"2+2"}}]}`, "message",
			`{"id":"c","choices":[{"message":{"role":"assistant","content":"4","reasoning":"2+2","reasoning_content":"2+2"}}]}`},
		{"both: kept", `{"choices":[{"delta":{"reasoning":"a","reasoning_content":"b"}}]}`, "delta", ""},
		{"empty reasoning", `{"choices":[{"delta":{"reasoning":""}}]}`, "delta", ""},
		{"reasoning not a string", `{"choices":[{"delta":{"reasoning":{"effort":"high"}}}]}`, "delta", ""},
		{"reasoning_content only", `{"choices":[{"delta":{"reasoning_content":"a"}}]}`, "delta", ""},
		{"the word in text", `{"choices":[{"delta":{"content":"\"reasoning\""}}]}`, "delta", ""},
		{"not json", `{"reasoning"`, "delta", ""},
		{"no choices", `{"reasoning":"x"}`, "delta", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed := aliasReasoning([]byte(tt.in), tt.member)
			require.Equal(t, tt.want != "", changed)
			if changed {
				require.JSONEq(t, tt.want, string(out))
			}
		})
	}
}

func TestSSEReasoningStream(t *testing.T) {
	in := "data: {\"choices\":[{\"delta\":{\"reasoning\":\"a b\"}}]}\r\n\r\n" +
		": keep-alive\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: [DONE]"
	out, err := io.ReadAll(newSSEReasoning(io.NopCloser(&smallReads{r: strings.NewReader(in), n: 3})))
	require.NoError(t, err)
	lines := strings.Split(string(out), "\n")
	require.Len(t, lines, strings.Count(in, "\n")+1)
	var first struct {
		Choices []struct {
			Delta map[string]string `json:"delta"`
		} `json:"choices"`
	}
	require.True(t, strings.HasSuffix(lines[0], "\r"), "line ends are kept")
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(lines[0]), "data: ")), &first))
	require.Equal(t, map[string]string{"reasoning": "a b", "reasoning_content": "a b"}, first.Choices[0].Delta)
	require.Equal(t, strings.Join(strings.Split(in, "\n")[1:], "\n"), strings.Join(lines[1:], "\n"), "other lines pass unchanged")
}

// FuzzSSEReasoning: whatever a server streams, however the reads split
// it, every line passes on as one line — unchanged unless it is a data
// line with a reasoning to copy, which then gains reasoning_content.
func FuzzSSEReasoning(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"reasoning\":\"x\"}}]}\n\ndata: [DONE]\n\n",
		"data:{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"\\u003c\"}},{\"delta\":{\"reasoning\":\"y\"}}]}\r\n",
		"data: {\"choices\":[{\"delta\":{\"reasoning\":\"x\",\"reasoning_content\":\"y\"}}]}",
		"data: {\"reasoning\"\n", "\n\n\n", "", "data: [DONE]",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, body []byte, n uint8) {
		out, err := io.ReadAll(newSSEReasoning(io.NopCloser(&smallReads{r: bytes.NewReader(body), n: int(n)%16 + 1})))
		require.NoError(t, err)
		if !bytes.Contains(body, reasoningKey) {
			require.Equal(t, body, out)
			return
		}
		in, got := bytes.SplitAfter(body, []byte("\n")), bytes.SplitAfter(out, []byte("\n"))
		require.Len(t, got, len(in))
		for i := range in {
			if bytes.Equal(in[i], got[i]) {
				continue
			}
			require.Equal(t, aliasSSELine(in[i]), got[i])
			var before, after struct {
				Choices []map[string]json.RawMessage `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(in[i]), []byte("data:")), &before))
			require.NoError(t, json.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(got[i]), []byte("data: ")), &after))
			require.Len(t, after.Choices, len(before.Choices))
			for j, c := range before.Choices {
				var d, a map[string]any
				if json.Unmarshal(c["delta"], &d) != nil || d == nil {
					if c["delta"] != nil {
						require.JSONEq(t, string(c["delta"]), string(after.Choices[j]["delta"]), "not a delta object: left as it was")
					}
					continue
				}
				require.NoError(t, json.Unmarshal(after.Choices[j]["delta"], &a))
				r, _ := d["reasoning"].(string)
				rc, _ := d["reasoning_content"].(string)
				if r != "" && rc == "" {
					d["reasoning_content"] = r // the one change
				}
				require.Equal(t, d, a, "choice %d of %q", j, got[i])
			}
		}
	})
}
