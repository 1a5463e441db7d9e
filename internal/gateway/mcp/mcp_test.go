package mcp

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestMCPResult: a turn's end as a tools/call result — its text, its JSON
// as structured content, its files as resource links, or its failure —
// with the turn's stream id in _meta.
func TestMCPResult(t *testing.T) {
	block := func(b agent.Block) agent.Event {
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		return agent.Event{Kind: agent.EventContent, Content: raw}
	}
	done := agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted}
	for _, tc := range []struct {
		name       string
		events     []agent.Event
		want       []mcp.Content
		structured string
		isError    bool
	}{
		{name: "text", events: []agent.Event{{Kind: agent.EventToken, Text: "4"}, block(agent.Block{Type: agent.BlockText, Text: "2+2 = 4"}), done},
			want: []mcp.Content{&mcp.TextContent{Text: "2+2 = 4"}}},
		{name: "json and a file",
			events: []agent.Event{block(agent.Block{Type: agent.BlockImage, Ref: "cas://sha256:ab", MIMEType: "image/png", Name: "chart.png"}),
				block(agent.Block{Type: agent.BlockJSON, JSON: json.RawMessage(`{"n":4}`)}), block(agent.Block{Type: agent.BlockText, Text: `{"n":4}`}), done},
			want:       []mcp.Content{&mcp.ResourceLink{URI: "cas://sha256:ab", Name: "chart.png", MIMEType: "image/png"}, &mcp.TextContent{Text: `{"n":4}`}},
			structured: `{"n":4}`},
		{name: "no blocks", events: []agent.Event{{Kind: agent.EventToken, Text: "old"}, {Kind: agent.EventToken, Text: " turn"}, done},
			want: []mcp.Content{&mcp.TextContent{Text: "old turn"}}},
		{name: "failed", events: []agent.Event{{Kind: agent.EventStatus, Status: agent.StreamFailed,
			Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "the model failed"}}},
			want: []mcp.Content{&mcp.TextContent{Text: "the turn ended failed: the model failed"}}, isError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := newMCPTask("turn/demo/j", tc.events).result()
			require.Equal(t, tc.want, res.Content)
			require.Equal(t, tc.isError, res.IsError)
			require.Equal(t, "turn/demo/j", res.Meta["agentflow/stream_id"])
			if tc.structured != "" {
				require.JSONEq(t, tc.structured, string(res.StructuredContent.(json.RawMessage)))
			} else {
				require.Nil(t, res.StructuredContent)
			}
		})
	}
}
