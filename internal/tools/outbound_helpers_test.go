package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
	"github.com/agentflow/agentflow/internal/tools/openapitool"
)

// What the outbound tests, which run every kind that calls out, need of
// those kinds' own tests.

// egressTo is a tenant's egress client that allows the given host:ports.
func egressTo(t testing.TB, hosts ...string) *http.Client {
	t.Helper()
	p, err := egress.ParsePolicy(hosts)
	require.NoError(t, err)
	p.Tenant = "demo"
	return loopbackOpen(t).Client(p)
}

// memCache is a Cache in memory, for one tenant.
type memCache struct {
	mu sync.Mutex
	m  map[string]Output
}

func (c *memCache) Get(_ context.Context, key string) (Output, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.m[key]
	out.CacheHit = ok
	return out, ok, nil
}

func (c *memCache) Put(_ context.Context, key string, out Output, _ time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = out
	return nil
}

// entry is a catalog entry of the openapi_action kind as the loader makes
// it: what the entry leaves out comes from the kind.
func entry(config, approval string) agent.Tool {
	k := openapitool.OpenAPIAction()
	if approval == "" {
		approval = k.Approval
	}
	return agent.Tool{Name: "crm", Kind: k.Name, Description: k.Description,
		Parameters: k.Parameters, Approval: approval, Config: json.RawMessage(config)}
}

// mcpEntry is a catalog entry of the mcp kind with the given config.
func mcpEntry(name, config string) agent.Tool {
	return agent.Tool{Name: name, Kind: "mcp", Config: json.RawMessage(config), Approval: agent.ApprovalAlways}
}

// resolveEntry resolves an mcp entry as the registry does, and fills in
// what the registry adds (kind and source).
func resolveEntry(t testing.TB, entry agent.Tool, env ResolveEnv) ([]agent.Tool, error) {
	t.Helper()
	got, err := mcptool.MCP().Resolve(context.Background(), entry, env)
	for i := range got {
		got[i].Kind, got[i].Source = entry.Kind, entry.Name
	}
	return got, err
}

func byName(t testing.TB, specs []agent.Tool, name string) agent.Tool {
	t.Helper()
	for _, s := range specs {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no tool %q among %v", name, specs)
	return agent.Tool{}
}
