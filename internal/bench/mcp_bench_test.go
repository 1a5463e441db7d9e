package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// bearerTransport adds the benchmark's token to every request.
type bearerTransport struct{ base http.RoundTripper }

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer bench-token")
	return t.base.RoundTrip(r)
}

// BenchmarkMCPCall: what an MCP tools/call (the MCP Go SDK's client, one
// session, Streamable HTTP) adds to a one-tool turn over the same turn by
// gRPC Invoke, the calls alternating so that both see the same stack.
func BenchmarkMCPCall(b *testing.B) {
	const calls = 60
	st := newStack(b)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + st.HTTPAPIAddr() + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{base: http.DefaultTransport}},
	}, nil)
	must(b, err)
	defer session.Close()
	grpc := pb.NewAgentServiceClient(st.Conn)
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bench-token")

	viaMCP := func(id string) (time.Duration, error) {
		start := time.Now()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"prompt": "calc " + id}})
		if err != nil {
			return 0, err
		}
		if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "result 50") {
			return 0, fmt.Errorf("mcp call %s: unexpected result %v", id, res.Content)
		}
		return time.Since(start), nil
	}
	viaInvoke := func(id string) (time.Duration, error) {
		start := time.Now()
		res, err := grpc.Invoke(gctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "assistant", Prompt: "calc " + id}})
		if err != nil {
			return 0, err
		}
		if !strings.Contains(res.GetOutput(), "result 50") {
			return 0, fmt.Errorf("invoke %s: unexpected output %q", id, res.GetOutput())
		}
		return time.Since(start), nil
	}
	for range b.N {
		// Warm both paths: connections, caches, the session.
		for range 3 {
			_, err := viaMCP(testserver.RandomID())
			must(b, err)
			_, err = viaInvoke(testserver.RandomID())
			must(b, err)
		}
		var mcpTimes, invokeTimes []time.Duration
		for range calls {
			d, err := viaInvoke(testserver.RandomID())
			must(b, err)
			invokeTimes = append(invokeTimes, d)
			d, err = viaMCP(testserver.RandomID())
			must(b, err)
			mcpTimes = append(mcpTimes, d)
		}
		b.ReportMetric(ms(percentile(invokeTimes, 0.5)), "invoke-p50-ms")
		b.ReportMetric(ms(percentile(mcpTimes, 0.5)), "mcp-p50-ms")
		b.ReportMetric(ms(percentile(mcpTimes, 0.5)-percentile(invokeTimes, 0.5)), "mcp-added-p50-ms")
		b.ReportMetric(ms(percentile(invokeTimes, 0.99)), "invoke-p99-ms")
		b.ReportMetric(ms(percentile(mcpTimes, 0.99)), "mcp-p99-ms")
	}
}
