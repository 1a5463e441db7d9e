package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpGatewayKill: an MCP client calls an agent through the first
// gateway, which is killed (SIGKILL) as the answer streams; the client's
// connection goes to the second gateway (a load balancer's move), where
// it resumes the call's stream with Last-Event-ID and receives the rest
// of the run and the answer, once.
func mcpGatewayKill(ctx context.Context, e *env, job string) error {
	spec := computeTurn("", "calc")(e, job)
	lb, err := gatewayBalancer(e)
	if err != nil {
		return err
	}
	defer lb.close()
	first := e.top.Gateways[0]

	var once sync.Once
	killed := make(chan error, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			// A preview of the answer: the turn is streaming it.
			if !strings.Contains(req.Params.Message, "=") {
				return
			}
			once.Do(func() { killed <- lb.killFirst(e) })
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + lb.addr() + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session's stream, resumed: 2026-07-28 has neither
	if err != nil {
		return fmt.Errorf("mcp connect: %w", err)
	}
	defer func() { _ = session.Close() }()
	params := &mcp.CallToolParams{Name: "calc", Arguments: map[string]any{"prompt": spec.prompt}}
	params.SetProgressToken(job)
	res, err := session.CallTool(ctx, params)
	if err != nil {
		return fmt.Errorf("mcp call: %w", err)
	}
	select {
	case err := <-killed:
		if err != nil {
			return fmt.Errorf("kill %s: %w", first.Name, err)
		}
	default:
		return errors.New("the call ended before the gateway could be killed: no preview of the answer came")
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("mcp call: want one text, got %+v", res.Content)
	}
	text, _ := res.Content[0].(*mcp.TextContent)
	if text == nil || text.Text != spec.want {
		return fmt.Errorf("mcp call answered %+v, want %q", res.Content[0], spec.want)
	}
	return nil
}

// bearerTransport adds the suite's token to every request.
type bearerTransport struct{}

func (bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}

// balancer forwards TCP connections to one backend, and can move to
// another: the connections to the old one are cut, the next ones go to
// the new one.
type balancer struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   []net.Conn
}

// gatewayBalancer is a balancer in front of the first of the stack's two
// gateways, to move to the second when a run kills the first
// (balancer.killFirst).
func gatewayBalancer(e *env) (*balancer, error) {
	return newBalancer(e.top.Gateways[0].HTTPAPIAddr)
}

// killFirst kills the first gateway (SIGKILL) and moves to the second,
// as a load balancer would once its health check fails.
func (b *balancer) killFirst(e *env) error {
	err := e.top.Gateways[0].Kill()
	b.moveTo(e.top.Gateways[1].HTTPAPIAddr)
	return err
}

func newBalancer(backend string) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("balancer: %w", err)
	}
	b := &balancer{ln: ln, backend: backend}
	go b.serve()
	return b, nil
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		target := b.backend
		b.mu.Unlock()
		s, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, s)
		b.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

func (b *balancer) moveTo(backend string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backend = backend
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

func (b *balancer) close() {
	_ = b.ln.Close()
	b.moveTo("")
}
