package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
)

// specHash is tool_versions.spec_hash of the tenant's tool at version.
func specHash(t *testing.T, s *store.Store, tenant, name string, version int) string {
	t.Helper()
	var h string
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT spec_hash FROM tool_versions WHERE tenant_id = $1 AND name = $2 AND version = $3`,
		tenant, name, version).Scan(&h))
	return h
}

// TestToolVersionsInAgentVersions: each tool of an agent version names
// the definition it is, its tool_versions version and spec_hash, whether
// the agent names the tool or holds its spec (as the catalog's files
// resolve it); a change of the tool is a new version the agent's next
// version names; a tool defined inside its agent has its hash and no
// version; what a document says of versions is not read.
func TestToolVersionsInAgentVersions(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	own := agent.Tool{Name: "own", Kind: "calculator", Description: "defined in its agent", Version: 7, SpecHash: "forged"}
	cat := func(description string) agent.Catalog {
		tool := calculatorTool(description)
		tool.Version, tool.SpecHash = 99, "forged"
		granted := tool
		granted.FromToolkit = "maths"
		a := assistant("Be brief.")
		a.Tools = []agent.Tool{granted, own}
		b := assistant("Be briefer.", "calculator")
		b.ID = "named"
		return agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "acme", Tools: []agent.Tool{tool}, Agents: []agent.Agent{a, b}}}}
	}
	for i, description := range []string{"Evaluates arithmetic.", "Evaluates arithmetic exactly."} {
		_, err := s.ApplyCatalog(ctx, cat(description), false)
		require.NoError(t, err)
		version := i + 1
		want := agent.ToolVersion{Version: version, SpecHash: specHash(t, s, "acme", "calculator", version)}
		for _, id := range []string{"assistant", "named"} {
			a, err := s.ActiveAgent(ctx, "acme", id)
			require.NoError(t, err)
			calc, ok := a.Tool("calculator")
			require.True(t, ok)
			require.Equal(t, want, calc.VersionOf(), "%s's calculator", id)
			require.Equal(t, want.SpecHash, calc.ContentHash(), "the version names the spec the agent holds")
		}
		a, err := s.ActiveAgent(ctx, "acme", "assistant")
		require.NoError(t, err)
		o, ok := a.Tool("own")
		require.True(t, ok)
		require.Equal(t, agent.ToolVersion{SpecHash: own.ContentHash()}, o.VersionOf(), "a tool defined inside its agent has no catalog version")
	}
	var stored json.RawMessage
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT spec FROM tool_versions WHERE tenant_id = 'acme' AND name = 'calculator' AND version = 2`).Scan(&stored))
	require.NotContains(t, string(stored), "forged", "a tool's spec does not name its own version")
	require.NotContains(t, string(stored), `"version"`)
}

// TestApplyNotesToolsNotStrict: applying an agent whose model would be
// sent a tool without strict says which and why; every tool strict, or
// a model that takes no strict tools, says nothing.
func TestApplyNotesToolsNotStrict(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	freeForm := agent.Tool{Name: "fetch", Kind: "execute_pipeline",
		Parameters: json.RawMessage(`{"type":"object","properties":{"params":{"type":"object"}},"required":["params"]}`)}
	var many []agent.Tool
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		t := freeForm
		t.Name = name
		many = append(many, t)
	}
	agents := []agent.Agent{
		{ID: "loose", Model: "openai:gpt-4o-mini", Tools: []agent.Tool{calculatorTool("calc"), freeForm}},
		{ID: "many", Model: "openai:gpt-4o-mini", Tools: many},
		{ID: "strict", Model: "openai:gpt-4o-mini", Tools: []agent.Tool{calculatorTool("calc")}},
		{ID: "old", Model: "anthropic:claude-3-5-haiku-latest", Tools: []agent.Tool{freeForm}},
	}
	report, err := s.ApplyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "acme", Agents: agents}}}, false)
	require.NoError(t, err)
	notes := map[string]string{}
	for _, c := range report.Changes {
		if c.Kind == store.KindAgent {
			notes[c.Name] = c.Note
		}
	}
	require.Equal(t, "tools sent to openai:gpt-4o-mini without strict: fetch (at /properties/params: an object without declared properties (a free-form map), which strict mode cannot describe)",
		notes["loose"])
	require.Regexp(t, `^tools sent to openai:gpt-4o-mini without strict: a \(at .*\); e \(at [^;]*\); and 2 more$`, notes["many"], "the first five, and a count")
	require.Empty(t, notes["strict"])
	require.Empty(t, notes["old"])
}

// TestCompiledAgents: an agent version's artefact is kept by its SHA-256
// — in the object store when the store has one, else in its row — and
// read back checked; its object deleted, it is not found, and storing
// the same bytes again names the same artefact.
func TestCompiledAgents(t *testing.T) {
	t.Parallel()
	s, objects, _ := openObjects(t)
	plain := open(t, store.Options{})
	ctx := t.Context()
	data := []byte(`{"format":"agentflow.compiled/1","agent_id":"assistant"}`)
	sum := sha256.Sum256(data)
	ref := agent.CompiledRef(hex.EncodeToString(sum[:]))
	for name, st := range map[string]*store.Store{"object store": s, "rows": plain} {
		_, err := st.ApplyCatalog(ctx, demoCatalog("Be brief.", "Evaluates arithmetic."), false)
		require.NoError(t, err, name)
		_, err = st.CompiledAgent(ctx, "demo", "assistant", 1)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%s: %v", name, err)

		got, err := st.PutCompiledAgent(ctx, "demo", "assistant", 1, agent.CompiledFormat, data)
		require.NoError(t, err, name)
		require.Equal(t, ref, got, name)
		c, err := st.CompiledAgent(ctx, "demo", "assistant", 1)
		require.NoError(t, err, name)
		require.Equal(t, ref, c.Ref)
		require.Equal(t, data, c.Data)
		require.Equal(t, agent.CompiledFormat, c.Format)
		_, err = st.PutCompiledAgent(ctx, "demo", "assistant", 2, agent.CompiledFormat, data)
		require.Error(t, err, "%s: a version that does not exist has no artefact", name)
	}

	key := store.CompiledKey(hex.EncodeToString(sum[:]))
	c, err := s.CompiledAgent(ctx, "demo", "assistant", 1)
	require.NoError(t, err)
	require.Equal(t, key, c.ObjectKey)
	info, err := objects.Stat(ctx, key)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), info.Size)
	require.Zero(t, count(t, s, `SELECT count(*) FROM compiled_agents WHERE body IS NOT NULL`), "kept in the object store, not the row")
	require.Equal(t, 1, count(t, plain, `SELECT count(*) FROM compiled_agents WHERE body IS NOT NULL AND object_key IS NULL`))

	require.NoError(t, objects.Delete(ctx, key))
	_, err = s.CompiledAgent(ctx, "demo", "assistant", 1)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	got, err := s.PutCompiledAgent(ctx, "demo", "assistant", 1, agent.CompiledFormat, data)
	require.NoError(t, err)
	require.Equal(t, ref, got)
	_, err = objects.Stat(ctx, key)
	require.NoError(t, err, "stored again")
	require.NotErrorIs(t, err, objstore.ErrNotFound)
}
