package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
)

// guardTools is a tenant's tools that tool guards name in the tests below.
const guardTools = `tenant: demo
tools:
  - name: check
    kind: calculator
    parameters: {type: object, properties: {stage: {type: string}, text: {type: string}}}
  - {name: calc, kind: calculator}
  - {name: asks, kind: calculator, approval: always, parameters: {type: object}}
  - {name: helper, kind: delegate_to_agent, config: {agents: [a]}}
agents:
  - id: a
    model: openai:gpt-4o-mini
    guardrails:
`

// TestToolGuardProblems: a tool guard that names no tool of the tenant, a
// tool that cannot be a guard's, or has fields that do not validate is
// refused when the catalog is applied, at the line of the value.
func TestToolGuardProblems(t *testing.T) {
	tests := []struct {
		name string
		link string
		want string
	}{
		{"unknown tool", "      - tool: {name: nope}\n",
			`t.yaml:13: agents[0].guardrails[0].tool.name: tool "nope" is not defined for tenant "demo"; defined: asks, calc, check, helper`},
		{"no name", "      - tool: {on: [input]}\n",
			`t.yaml:13: agents[0].guardrails: guardrails[0].tool: name is required: one of the tenant's tools`},
		{"a stage that is none", "      - tool: {name: check, on: [both]}\n",
			`t.yaml:13: agents[0].guardrails: guardrails[0].tool: on[0] "both": want input or output`},
		{"a timeout out of range", "      - tool: {name: check, timeout_ms: 40000}\n",
			`t.yaml:13: agents[0].guardrails: guardrails[0].tool: timeout_ms is 40000; want 1 to 30000`},
		{"a failure mode that is none", "      - tool: {name: check, fail: maybe}\n",
			`t.yaml:13: agents[0].guardrails: guardrails[0].tool: fail "maybe": want closed or open`},
		{"an unknown field", "      - tool: {name: check, url: 'https://x.example'}\n",
			`t.yaml:13: agents[0].guardrails: json: unknown field "url" (a guardrail is one of output, injection, http, tool, moderation or tool_limits)`},
		{"two guards in one link", "      - tool: {name: check}\n        http: {url: 'https://x.example'}\n",
			`t.yaml:13: agents[0].guardrails: guardrails[0]: give one guardrail: output, injection, http, tool, moderation or tool_limits`},
		{"a spec written in", "      - tool:\n          name: check\n          spec: {name: check, kind: calculator}\n",
			`t.yaml:15: agents[0].guardrails[0].tool.spec: is set when the catalog is applied: name the tool, and its spec is pinned with the agent`},
		{"a tool that needs approval", "      - tool: {name: asks}\n",
			`t.yaml:13: agents[0].guardrails[0].tool.name: tool "asks" needs approval of every call, and a guard cannot wait for a person`},
		{"a tool the turn runs itself", "      - tool: {name: helper}\n",
			`t.yaml:13: agents[0].guardrails[0].tool.name: tool "helper" is of kind delegate_to_agent, whose calls the turn runs itself`},
		{"a tool that takes other arguments", "      - tool: {name: calc, on: [output]}\n",
			`t.yaml:13: agents[0].guardrails[0].tool.name: tool "calc" cannot take a guard's arguments {"stage", "text", "agent_id", "job_id"} (stage output): its input schema says `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, guardTools+tt.link)
			require.Len(t, got, 1, "%v", got)
			require.True(t, strings.HasPrefix(got[0], tt.want), "got  %s\nwant %s", got[0], tt.want)
		})
	}

	// A name an MCP entry might stand for is left to Resolve; another is
	// refused with what such names look like.
	src := "tenant: demo\ntools:\n  - {name: policy, kind: mcp, config: {url: 'https://policy.example/mcp'}}\n" +
		"agents:\n  - id: a\n    model: openai:gpt-4o-mini\n    guardrails:\n      - tool: {name: policy_check}\n      - tool: {name: check}\n"
	got := problems(t, src)
	require.Equal(t, []string{`t.yaml:9: agents[0].guardrails[1].tool.name: tool "check" is not defined for tenant "demo"; defined: policy (a tool entry policy stands for, once resolved, is named policy_<its tool>)`}, got)
}

// TestToolGuardPinned: a tool guard's tool is pinned with the agent, as
// its full spec, whether or not the agent is granted it; the model is
// given only the tools it is granted.
func TestToolGuardPinned(t *testing.T) {
	cat, err := Parse(testKinds(t), "t.yaml", []byte(guardTools+"      - tool: {name: check, on: [input], timeout_ms: 1500, fail: open}\n    tools: [calc]\n"))
	require.NoError(t, err)
	ag := cat.Tenants[0].Agents[0]
	require.Len(t, ag.Tools, 1)
	require.Equal(t, "calc", ag.Tools[0].Name)
	g := ag.Guardrails[0].Tool
	require.NotNil(t, g.Spec)
	require.Equal(t, "check", g.Spec.Name)
	require.Equal(t, "calculator", g.Spec.Kind)
	require.JSONEq(t, `{"type": "object", "properties": {"stage": {"type": "string"}, "text": {"type": "string"}}}`, string(g.Spec.Parameters))
	require.Equal(t, agent.GuardCall{On: []string{"input"}, TimeoutMS: 1500, Fail: "open"}, g.GuardCall)
}

// TestToolGuardResolve: a tool guard naming an MCP server's tool is
// pinned when the entry is resolved, to the tool's spec as the server
// lists it; a tool the server does not offer, the entry's own name, a
// tool that needs approval and one whose input schema refuses the
// guard's arguments are refused. An entry that cannot be reached, applied
// anyway, leaves the guard unpinned.
func TestToolGuardResolve(t *testing.T) {
	srv := mcptest.StartPolicy(t, nil)
	op, err := egress.OpenOperator("127.0.0.0/8") // the operator opens the test's server on loopback
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
	require.NoError(t, err)
	resolve := func(approval, guard, url string, allow bool) (agent.Catalog, error) {
		src := `
tenant: demo
egress: ["` + srv.Addr + `", "127.0.0.1:1"]
tools:
  - {name: policy, kind: mcp, approval: ` + approval + `, config: {url: "` + url + `", timeout_sec: 5}}
agents:
  - id: a
    model: openai:gpt-4o-mini
    guardrails:
      - tool: {name: ` + guard + `}
`
		cat, err := Parse(kinds, "t.yaml", []byte(src))
		require.NoError(t, err)
		p, err := egress.ParsePolicy(cat.Tenants[0].Egress)
		require.NoError(t, err)
		return cat, Resolve(context.Background(), kinds, &cat, func(tc agent.TenantCatalog) (tools.ResolveEnv, error) {
			return tools.ResolveEnv{TenantID: tc.TenantID, HTTP: op.Client(p), AllowUnreachable: allow}, nil
		})
	}

	cat, err := resolve("never", "policy_policy_check", srv.URL, false)
	require.NoError(t, err)
	ag := cat.Tenants[0].Agents[0]
	require.Empty(t, ag.Tools, "the guard's tool is not granted")
	spec := ag.Guardrails[0].Tool.Spec
	require.NotNil(t, spec)
	require.Equal(t, "policy_policy_check", spec.Name)
	require.Equal(t, "mcp", spec.Kind)
	require.Equal(t, "policy", spec.Source)
	var cfg struct{ Tool string }
	require.NoError(t, json.Unmarshal(spec.Config, &cfg))
	require.Equal(t, "policy_check", cfg.Tool)
	require.Contains(t, string(spec.Parameters), `"job_id"`)

	for _, tc := range []struct{ approval, guard, want string }{
		{"never", "policy_nope", `agent "a": guardrails[0].tool: entry "policy" offers no tool "policy_nope"; it offers policy_broken_check, policy_partial_check, policy_policy_check, policy_vague_check`},
		{"never", "policy", `agent "a": guardrails[0].tool: "policy" is the entry that stands for its tools (policy_broken_check, `},
		{"always", "policy_policy_check", `agent "a": guardrails[0].tool: tool "policy_policy_check" needs approval of every call`},
		{"never", "policy_partial_check", `agent "a": guardrails[0].tool: tool "policy_partial_check" cannot take a guard's arguments {"stage", "text", "agent_id", "job_id"} (stage input): its input schema says `},
	} {
		_, err := resolve(tc.approval, tc.guard, srv.URL, false)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		require.Contains(t, err.Error(), tc.want)
	}

	// The server is down, and the catalog applied without its tools.
	cat, err = resolve("never", "policy_policy_check", "http://127.0.0.1:1/mcp", true)
	require.NoError(t, err)
	require.Nil(t, cat.Tenants[0].Agents[0].Guardrails[0].Tool.Spec)
}

// TestToolGuardExample: docs/guides/guardrails.md's tool guard example is
// a catalog the loader takes, its guard left to be pinned when the MCP
// entry is resolved.
func TestToolGuardExample(t *testing.T) {
	page, err := docs.Page("guides/guardrails.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(page, "A `tool` guardrail asks")
	require.True(t, ok, "docs/guides/guardrails.md shows a tool guard")
	blocks := docs.Blocks(after, "yaml")
	require.NotEmpty(t, blocks)
	cat, err := Parse(testKinds(t), "guardrails.md", []byte(blocks[0]))
	require.NoError(t, err)
	g := cat.Tenants[0].Agents[0].Guardrails[0].Tool
	require.Equal(t, "compliance_policy_check", g.Name)
	require.Nil(t, g.Spec, "pinned when the entry is resolved")
}
