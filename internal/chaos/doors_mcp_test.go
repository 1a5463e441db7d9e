package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
)

// mcpClient calls the agent as a tool with the MCP Go SDK's client and
// a progress token. The SDK's streamable transport resumes a broken
// stream by itself (Last-Event-ID); each progress notification names, in
// its _meta, the index of the turn's event it tells of, and those must
// rise: a notification of an event already told of is a duplicate. The
// call's result is the answer.
func mcpClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	hc := &http.Client{Transport: bearerTransport{}}
	var mu sync.Mutex
	var read doorRead
	var last float64
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			idx, ok := req.Params.Meta["agentflow/event_index"].(float64)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if idx <= last {
				read.flaws = append(read.flaws, fmt.Sprintf("progress of event %v after event %v", idx, last))
			}
			last = idx
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.base + mcpdoor.MCPPath, HTTPClient: hc}, nil)
	if err != nil {
		return doorRead{}, fmt.Errorf("mcp connect: %w", err)
	}
	defer func() { _ = session.Close() }()
	params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": c.prompt}}
	params.SetProgressToken(c.job)
	res, err := session.CallTool(ctx, params)
	if err != nil {
		return doorRead{}, fmt.Errorf("mcp call: %w", err)
	}
	if res.IsError || len(res.Content) != 1 {
		return doorRead{}, fmt.Errorf("mcp call: want one text, got %+v", res.Content)
	}
	text, _ := res.Content[0].(*mcp.TextContent)
	if text == nil {
		return doorRead{}, fmt.Errorf("mcp call answered %+v, want a text", res.Content[0])
	}
	mu.Lock()
	defer mu.Unlock()
	read.text = text.Text
	return read, nil
}
