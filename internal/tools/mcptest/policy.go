package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PolicyCheck is what a tool guard calls its tool with.
type PolicyCheck struct {
	Stage   string `json:"stage" jsonschema:"input (what goes into a model call) or output (the answer so far)"`
	Text    string `json:"text" jsonschema:"the text to check"`
	AgentID string `json:"agent_id" jsonschema:"the agent whose turn it is"`
	JobID   string `json:"job_id" jsonschema:"the turn's job"`
}

// PolicyServer is a policy checker as an MCP server over Streamable HTTP,
// for tool guards. Its tools:
//   - policy_check answers {"allow": false, "reason": …} when the text
//     holds one of Deny's phrases (case ignored; the reason is the
//     phrase's), else {"allow": true};
//   - broken_check fails every call (a tool error that quotes the text,
//     as careless servers do);
//   - vague_check answers text that is not a verdict;
//   - partial_check takes stage and text only, and its input schema
//     refuses other arguments.
type PolicyServer struct {
	// URL is the MCP endpoint; Addr its host:port.
	URL, Addr string
	// Deny maps phrases to the reasons policy_check refuses them for.
	Deny map[string]string

	mu     sync.Mutex
	checks []PolicyCheck
}

// StartPolicy serves the policy checker on a loopback port until the test
// ends.
func StartPolicy(t testing.TB, deny map[string]string) *PolicyServer {
	t.Helper()
	p := &PolicyServer{Deny: deny}
	s := p.server()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	p.Addr = strings.TrimPrefix(srv.URL, "http://")
	p.URL = srv.URL + "/mcp"
	return p
}

// Checks are the checks policy_check received, in order.
func (p *PolicyServer) Checks() []PolicyCheck {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PolicyCheck(nil), p.checks...)
}

func (p *PolicyServer) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "policy", Version: "v1.0.0"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "policy_check", Description: "Check a text against the company's policy."},
		func(_ context.Context, _ *mcp.CallToolRequest, in PolicyCheck) (*mcp.CallToolResult, any, error) {
			p.mu.Lock()
			p.checks = append(p.checks, in)
			p.mu.Unlock()
			verdict := map[string]any{"allow": true}
			lower := strings.ToLower(in.Text)
			for phrase, reason := range p.Deny {
				if strings.Contains(lower, strings.ToLower(phrase)) {
					verdict = map[string]any{"allow": false, "reason": reason}
				}
			}
			out, err := json.Marshal(verdict)
			return text(string(out)), nil, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "broken_check", Description: "A check that always fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, in PolicyCheck) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("cannot check " + in.Text)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "vague_check", Description: "A check that answers no verdict."},
		func(_ context.Context, _ *mcp.CallToolRequest, in PolicyCheck) (*mcp.CallToolResult, any, error) {
			return text("Looks fine to me: " + in.Text), nil, nil
		})
	type partial struct {
		Stage string `json:"stage"`
		Text  string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "partial_check", Description: "A check that takes the stage and the text only."},
		func(context.Context, *mcp.CallToolRequest, partial) (*mcp.CallToolResult, any, error) {
			return text(`{"allow": true}`), nil, nil
		})
	return s
}
