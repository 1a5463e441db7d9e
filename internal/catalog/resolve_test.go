package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// listerKind is a kind whose entries stand for the tools their config
// lists (as an MCP server's entry stands for the server's tools), or fail
// as their config says.
func listerKind() tools.Kind {
	return tools.Kind{
		Name:       "lister",
		Parameters: json.RawMessage(`{"type": "object"}`),
		Config:     json.RawMessage(`{"type": "object"}`),
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) {
			return nil, nil
		},
		Resolve: func(_ context.Context, spec agent.Tool, env tools.ResolveEnv) ([]agent.Tool, error) {
			var cfg struct {
				Tools []string `json:"tools"`
				Down  bool     `json:"down"`
			}
			if err := json.Unmarshal(spec.Config, &cfg); err != nil {
				return nil, err
			}
			if cfg.Down && !env.AllowUnreachable {
				return nil, agent.Errorf(agent.CodeUnavailable, "the server cannot be reached")
			}
			var out []agent.Tool
			for _, name := range cfg.Tools {
				out = append(out, agent.Tool{Name: spec.Name + "_" + name, Description: "offered by " + env.TenantID, Parameters: json.RawMessage(`{"type": "object"}`)})
			}
			return out, nil
		},
	}
}

func TestResolve(t *testing.T) {
	kinds, err := tools.NewRegistry(tools.Deps{}, append(tools.Builtin(), listerKind())...)
	require.NoError(t, err)
	parse := func(src string) agent.Catalog {
		cat, err := Parse(kinds, "t.yaml", []byte(src))
		require.NoError(t, err)
		return cat
	}
	env := func(allow bool) func(agent.TenantCatalog) (tools.ResolveEnv, error) {
		return func(tc agent.TenantCatalog) (tools.ResolveEnv, error) {
			return tools.ResolveEnv{TenantID: tc.TenantID, AllowUnreachable: allow}, nil
		}
	}

	cat := parse(`
tenant: demo
tools:
  - {name: calc, kind: calculator}
  - {name: gh, kind: lister, approval: always, config: {tools: [search, issue]}}
toolkits:
  - {name: kit, tools: [gh]}
agents:
  - {id: a, model: 'openai:m', tools: [calc, gh]}
  - {id: b, model: 'openai:m', tools: [kit]}
  - {id: c, model: 'openai:m', tools: [calc]}
`)
	require.NoError(t, Resolve(context.Background(), kinds, &cat, env(false)))
	tc := cat.Tenants[0]
	var names []string
	for _, tool := range tc.Tools {
		names = append(names, tool.Name+"<"+tool.Entry())
	}
	require.Equal(t, []string{"calc<calc", "gh_search<gh", "gh_issue<gh"}, names)
	granted := func(i int) (out []string) {
		for _, tool := range tc.Agents[i].Tools {
			out = append(out, tool.Name+"/"+tool.FromToolkit)
			require.True(t, tool.Kind != "lister" || tool.Approval == agent.ApprovalAlways, "the entry's approval carries over")
		}
		return out
	}
	require.Equal(t, []string{"calc/", "gh_search/", "gh_issue/"}, granted(0))
	require.Equal(t, []string{"gh_search/kit", "gh_issue/kit"}, granted(1))
	require.Equal(t, []string{"calc/"}, granted(2))
	require.Equal(t, "offered by demo", tc.Tools[1].Description)

	tests := []struct{ name, src, want string }{
		{"a server that is down", "tenant: demo\ntools:\n  - {name: gh, kind: lister, config: {tools: [a], down: true}}\n",
			`tool "gh" (kind lister): the server cannot be reached (to apply the catalog without its tools for now, allow unreachable entries)`},
		{"a name taken", "tenant: demo\ntools:\n  - {name: gh_a, kind: calculator}\n  - {name: gh, kind: lister, config: {tools: [a]}}\n",
			`tool "gh" (kind lister) offers a tool named "gh_a", and "gh_a" is taken by a tool of its own`},
		{"a bad name", "tenant: demo\ntools:\n  - {name: gh, kind: lister, config: {tools: [a b]}}\n",
			`tool "gh" (kind lister) offers a tool named "gh_a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := parse(tt.src)
			err := Resolve(context.Background(), kinds, &cat, env(false))
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}

	// Allowed to be unreachable: the entry gives what it can.
	cat = parse("tenant: demo\ntools:\n  - {name: gh, kind: lister, config: {tools: [a], down: true}}\n")
	require.NoError(t, Resolve(context.Background(), kinds, &cat, env(true)))
	require.Len(t, cat.Tenants[0].Tools, 1)
	require.True(t, strings.HasPrefix(cat.Tenants[0].Tools[0].Name, "gh_"))
}
