package store_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func calculatorTool(description string) agent.Tool {
	return agent.Tool{
		Name:        "calculator",
		Kind:        "calculator",
		Description: description,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`),
		Approval:    agent.ApprovalNever,
	}
}

func assistant(prompt string, tools ...string) agent.Agent {
	a := agent.Agent{ID: "assistant", Model: "openai:gpt-4o-mini", SystemPrompt: prompt, Limits: agent.Limits{MaxIterations: 4}}
	for _, name := range tools {
		a.Tools = append(a.Tools, agent.Tool{Name: name})
	}
	return a
}

func demoCatalog(prompt, toolDescription string) agent.Catalog {
	return agent.Catalog{Tenants: []agent.TenantCatalog{{
		TenantID:     "demo",
		DefaultAgent: "assistant",
		Tools:        []agent.Tool{calculatorTool(toolDescription)},
		Agents:       []agent.Agent{assistant(prompt, "calculator")},
	}}}
}

// actions flattens a report to "kind/name=action@version" for comparison.
func actions(r store.ApplyReport) []string {
	var out []string
	for _, c := range r.Changes {
		s := c.Kind + "/" + c.Name + "=" + c.Action
		if c.Version > 0 {
			s += "@" + strconv.Itoa(c.Version)
		}
		out = append(out, s)
	}
	return out
}

func TestApplyCatalogVersions(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()

	steps := []struct {
		name    string
		catalog agent.Catalog
		want    []string
		prompt  string // of the active assistant afterwards
		tool    string // description of its calculator afterwards
		version int
	}{
		{
			name:    "first apply creates everything",
			catalog: demoCatalog("Be brief.", "Evaluates arithmetic."),
			want:    []string{"tenant/demo=created", "tool/calculator=created@1", "agent/assistant=created@1"},
			prompt:  "Be brief.", tool: "Evaluates arithmetic.", version: 1,
		},
		{
			name:    "same document again changes nothing",
			catalog: demoCatalog("Be brief.", "Evaluates arithmetic."),
			want:    []string{"tenant/demo=unchanged", "tool/calculator=unchanged@1", "agent/assistant=unchanged@1"},
			prompt:  "Be brief.", tool: "Evaluates arithmetic.", version: 1,
		},
		{
			name: "reformatted JSON schema is the same spec",
			catalog: func() agent.Catalog {
				c := demoCatalog("Be brief.", "Evaluates arithmetic.")
				c.Tenants[0].Tools[0].Parameters = json.RawMessage(`{
					"required": ["expression"],
					"properties": {"expression": {"type": "string"}},
					"type": "object"
				}`)
				return c
			}(),
			want:   []string{"tenant/demo=unchanged", "tool/calculator=unchanged@1", "agent/assistant=unchanged@1"},
			prompt: "Be brief.", tool: "Evaluates arithmetic.", version: 1,
		},
		{
			name:    "new prompt makes a new agent version",
			catalog: demoCatalog("Be thorough.", "Evaluates arithmetic."),
			want:    []string{"tenant/demo=unchanged", "tool/calculator=unchanged@1", "agent/assistant=updated@2"},
			prompt:  "Be thorough.", tool: "Evaluates arithmetic.", version: 2,
		},
		{
			name:    "changed tool makes new tool and agent versions",
			catalog: demoCatalog("Be thorough.", "Evaluates arithmetic expressions."),
			want:    []string{"tenant/demo=unchanged", "tool/calculator=updated@2", "agent/assistant=updated@3"},
			prompt:  "Be thorough.", tool: "Evaluates arithmetic expressions.", version: 3,
		},
		{
			name:    "returning to an old spec is a new version",
			catalog: demoCatalog("Be brief.", "Evaluates arithmetic."),
			want:    []string{"tenant/demo=unchanged", "tool/calculator=updated@3", "agent/assistant=updated@4"},
			prompt:  "Be brief.", tool: "Evaluates arithmetic.", version: 4,
		},
		{
			name: "agent resolves a stored tool not in the document",
			catalog: agent.Catalog{Tenants: []agent.TenantCatalog{{
				TenantID: "demo",
				Agents:   []agent.Agent{assistant("Be brief.", "calculator")},
			}}},
			want:   []string{"tenant/demo=unchanged", "agent/assistant=unchanged@4"},
			prompt: "Be brief.", tool: "Evaluates arithmetic.", version: 4,
		},
	}
	for _, st := range steps {
		report, err := s.ApplyCatalog(ctx, st.catalog, false)
		require.NoError(t, err, st.name)
		require.Equal(t, st.want, actions(report), st.name)

		a, err := s.ActiveAgent(ctx, "demo", "assistant")
		require.NoError(t, err, st.name)
		require.Equal(t, st.version, a.Version, st.name)
		require.Equal(t, "demo", a.TenantID, st.name)
		require.Equal(t, st.prompt, a.SystemPrompt, st.name)
		tool, ok := a.Tool("calculator")
		require.True(t, ok, st.name)
		require.Equal(t, st.tool, tool.Description, st.name)
		require.Equal(t, "calculator", tool.Kind, st.name)
		require.JSONEq(t, string(calculatorTool("").Parameters), string(tool.Parameters), st.name)
	}

	// Versions are immutable: a pinned version keeps its prompt and tools.
	v1, err := s.AgentVersion(ctx, "demo", "assistant", 1)
	require.NoError(t, err)
	require.Equal(t, 1, v1.Version)
	require.Equal(t, "Be brief.", v1.SystemPrompt)
	require.Equal(t, "Evaluates arithmetic.", v1.Tools[0].Description)
	v3, err := s.AgentVersion(ctx, "demo", "assistant", 3)
	require.NoError(t, err)
	require.Equal(t, "Evaluates arithmetic expressions.", v3.Tools[0].Description)
	_, err = s.AgentVersion(ctx, "demo", "assistant", 9)
	requireCode(t, err, agent.CodeNotFound)

	require.Equal(t, 4, count(t, s, "SELECT count(*) FROM agent_versions"))
	require.Equal(t, 3, count(t, s, "SELECT count(*) FROM tool_versions"))
	def, err := s.DefaultAgent(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, "assistant", def)
}

func TestApplyCatalogDefaultAgentAndList(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	ops := agent.Agent{ID: "ops", Model: "anthropic:claude-3-5-haiku", Tools: []agent.Tool{{
		Name: "restart_service", Kind: "http", Approval: agent.ApprovalAlways, Config: json.RawMessage(`{"url":"http://ops"}`),
	}}}

	// No default yet: the tenant exists but routing has nowhere to go.
	_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", Agents: []agent.Agent{ops}}}}, false)
	require.NoError(t, err)
	_, err = s.DefaultAgent(ctx, "demo")
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.DefaultAgent(ctx, "nobody")
	requireCode(t, err, agent.CodeNotFound)

	// A default may name an agent stored by an earlier document.
	report, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{
		TenantID: "demo", DefaultAgent: "ops",
		Tools:  []agent.Tool{calculatorTool("calc")},
		Agents: []agent.Agent{assistant("hi", "calculator")},
	}}}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"tenant/demo=updated", "tool/calculator=created@1", "agent/assistant=created@1"}, actions(report))
	def, err := s.DefaultAgent(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, "ops", def)

	agents, err := s.ListAgents(ctx, "demo")
	require.NoError(t, err)
	require.Len(t, agents, 2)
	require.Equal(t, "assistant", agents[0].ID)
	require.Equal(t, "ops", agents[1].ID)
	restart, ok := agents[1].Tool("restart_service")
	require.True(t, ok)
	require.Equal(t, agent.ApprovalAlways, restart.Approval)
	require.JSONEq(t, `{"url":"http://ops"}`, string(restart.Config))

	none, err := s.ListAgents(ctx, "nobody")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestApplyCatalogRejectsBadDocuments(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), false)
	require.NoError(t, err)

	good := func() agent.TenantCatalog {
		return agent.TenantCatalog{
			TenantID: "acme", DefaultAgent: "assistant",
			Tools:  []agent.Tool{calculatorTool("calc")},
			Agents: []agent.Agent{assistant("x", "calculator")},
		}
	}
	tests := []struct {
		name   string
		mutate func(c *agent.Catalog)
	}{
		{"unknown tool", func(c *agent.Catalog) { c.Tenants[1].Agents[0].Tools = []agent.Tool{{Name: "teleport"}} }},
		{"default agent unknown", func(c *agent.Catalog) { c.Tenants[1].DefaultAgent = "ghost" }},
		{"default agent of another tenant", func(c *agent.Catalog) {
			c.Tenants[1].DefaultAgent = "ops"
			c.Tenants[0].Agents = append(c.Tenants[0].Agents, agent.Agent{ID: "ops", Model: "openai:gpt-4o"})
		}},
		{"agent of another tenant", func(c *agent.Catalog) { c.Tenants[1].Agents[0].TenantID = "demo" }},
		{"inline tool without kind", func(c *agent.Catalog) {
			c.Tenants[1].Agents[0].Tools = []agent.Tool{{Name: "calculator", Description: "half a spec"}}
		}},
	}
	tables := []string{"tenants", "tools", "tool_versions", "agents", "agent_versions"}
	before := map[string]int{}
	for _, table := range tables {
		before[table] = count(t, s, "SELECT count(*) FROM "+table)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The valid first tenant changes too, so a partial write would show.
			c := demoCatalog("Changed prompt.", "Changed tool.")
			c.Tenants = append(c.Tenants, good())
			tt.mutate(&c)
			for _, dryRun := range []bool{true, false} {
				_, err := s.ApplyCatalog(ctx, c, dryRun)
				requireCode(t, err, agent.CodeInvalid)
			}
			for _, table := range tables {
				require.Equal(t, before[table], count(t, s, "SELECT count(*) FROM "+table), table)
			}
			a, err := s.ActiveAgent(ctx, "demo", "assistant")
			require.NoError(t, err)
			require.Equal(t, "Be brief.", a.SystemPrompt)
		})
	}
}

func TestApplyCatalogDryRun(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()

	report, err := s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), true)
	require.NoError(t, err)
	require.Equal(t, []string{"tenant/demo=created", "tool/calculator=created@1", "agent/assistant=created@1"}, actions(report))
	require.True(t, report.Changed())
	for _, table := range []string{"tenants", "tools", "tool_versions", "agents", "agent_versions"} {
		require.Zero(t, count(t, s, "SELECT count(*) FROM "+table), table)
	}
	_, err = s.ActiveAgent(ctx, "demo", "assistant")
	requireCode(t, err, agent.CodeNotFound)

	_, err = s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), false)
	require.NoError(t, err)
	report, err = s.ApplyCatalog(ctx, demoCatalog("Be thorough.", "calc"), true)
	require.NoError(t, err)
	require.Equal(t, []string{"tenant/demo=unchanged", "tool/calculator=unchanged@1", "agent/assistant=updated@2"}, actions(report))
	a, err := s.ActiveAgent(ctx, "demo", "assistant")
	require.NoError(t, err)
	require.Equal(t, 1, a.Version)
	require.Equal(t, "Be brief.", a.SystemPrompt)
	require.Equal(t, 1, count(t, s, "SELECT count(*) FROM agent_versions"))

	report, err = s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), true)
	require.NoError(t, err)
	require.False(t, report.Changed())
}

func TestApplyCatalogConcurrent(t *testing.T) {
	t.Parallel()
	// Concurrent applies of differing documents must each get their own
	// version instead of colliding on the next version number, also for
	// an agent that none of them finds stored yet.
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo"}}}, false)
	require.NoError(t, err)
	prompts := make([]string, 12)
	for i := range prompts {
		prompts[i] = "prompt " + strconv.Itoa(i)
	}
	errs := make(chan error, len(prompts))
	start := make(chan struct{})
	for _, p := range prompts {
		go func() {
			<-start
			c := demoCatalog(p, "calc")
			c.Tenants[0].Agents = append(c.Tenants[0].Agents, agent.Agent{ID: "newcomer", Model: "openai:gpt-4o", SystemPrompt: p})
			_, err := s.ApplyCatalog(ctx, c, false)
			errs <- err
		}()
	}
	close(start)
	// Wait for every apply before checking any, so that none outlives
	// the test when one fails.
	got := make([]error, len(prompts))
	for i := range got {
		got[i] = <-errs
	}
	for _, err := range got {
		require.NoError(t, err)
	}
	require.Equal(t, 2*len(prompts), count(t, s, "SELECT count(*) FROM agent_versions"))
	for _, id := range []string{"assistant", "newcomer"} {
		a, err := s.ActiveAgent(ctx, "demo", id)
		require.NoError(t, err)
		require.Equal(t, len(prompts), a.Version)
	}
}

// TestStageCatalog: staging stores a changed agent's and tool's new
// versions without making them active (the active ones still serve), a
// new agent is not staged, staging again stores nothing, and applying
// the staged document activates the staged versions instead of storing
// them a second time.
func TestStageCatalog(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, demoCatalog("Be brief.", "Evaluates arithmetic."), false)
	require.NoError(t, err)

	next := demoCatalog("Be thorough.", "Evaluates arithmetic exactly.")
	next.Tenants[0].Agents = append(next.Tenants[0].Agents, agent.Agent{ID: "newcomer", Model: "openai:gpt-4o-mini"})
	staged, err := s.StageCatalog(ctx, next)
	require.NoError(t, err)
	require.Equal(t, []string{"tenant/demo=unchanged", "tool/calculator=staged@2", "agent/assistant=staged@2", "agent/newcomer=not_staged"}, actions(staged))

	active, err := s.ActiveAgent(ctx, "demo", "assistant")
	require.NoError(t, err)
	require.Equal(t, 1, active.Version, "the staged version does not serve")
	require.Equal(t, "Be brief.", active.SystemPrompt)
	candidate, err := s.AgentVersion(ctx, "demo", "assistant", 2)
	require.NoError(t, err)
	require.Equal(t, "Be thorough.", candidate.SystemPrompt, "an evaluation reads the staged version by number")
	require.Equal(t, "Evaluates arithmetic exactly.", candidate.Tools[0].Description)
	_, err = s.ActiveAgent(ctx, "demo", "newcomer")
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "staging stores no new agent: %v", err)

	again, err := s.StageCatalog(ctx, next)
	require.NoError(t, err)
	require.Equal(t, actions(staged), actions(again), "staging twice stores nothing more")

	applied, err := s.ApplyCatalog(ctx, next, false)
	require.NoError(t, err)
	require.Contains(t, actions(applied), "agent/assistant=updated@2", "the staged version becomes active")
	require.Contains(t, actions(applied), "tool/calculator=updated@2")
	require.Contains(t, actions(applied), "agent/newcomer=created@1")
	active, err = s.ActiveAgent(ctx, "demo", "assistant")
	require.NoError(t, err)
	require.Equal(t, 2, active.Version)

	// A staged version the next apply does not take stays a version
	// that never served; the apply stores its own.
	_, err = s.StageCatalog(ctx, demoCatalog("Be curt.", "Evaluates arithmetic exactly."))
	require.NoError(t, err)
	applied, err = s.ApplyCatalog(ctx, demoCatalog("Be kind.", "Evaluates arithmetic exactly."), false)
	require.NoError(t, err)
	require.Contains(t, actions(applied), "agent/assistant=updated@4")
}
