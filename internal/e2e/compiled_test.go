package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
)

// strictToolsScript has the model search the issue tracker, leaving out the
// search's optional state, as a script does; the tool is strict, so the
// scripted provider writes the call as a strict model does, with
// "state": null.
const strictToolsScript = `
rules:
  - name: search
    when: {user: '(?i)^find the (?P<word>\w+) issues'}
    reply: {tool_calls: [{name: gh_search, arguments: '{"query": "${word}"}'}]}
  - name: answer
    when: {tool: '(?s)^(\d+) issues match'}
    reply: {text: 'Found $1.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
`

// strictToolsCatalog grants the agent the tracker's search (an MCP server
// whose SDK checks a call's arguments against the tool's schema, and
// refuses a null for its optional state). @URL and @HOST stand for the
// server's endpoint and host:port.
const strictToolsCatalog = `
tenant: demo
default_agent: triage
egress: ["@HOST"]
tools:
  - name: gh
    kind: mcp
    approval: never
    config: {url: "@URL", tools: [search]}
agents:
  - id: triage
    model: openai:gpt-4o-mini
    tools: [gh]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

// TestStrictToolsVersionsAndCompiledAgent is the seeds' strict tools,
// tool versions and compiled agents on the real stack:
//
//   - the model is sent the MCP tool strict, its optional state required
//     and nullable, and the provider's check (the scripted model's) takes
//     the schema; the model's call names state: null, which the tool's
//     server never sees — it gets the arguments its own schema says —,
//     and the turn's steps keep the call as the model wrote it;
//   - the tool's result step names the tool's definition: its version in
//     tool_versions and its spec_hash, which the pinned agent version's
//     tool names too;
//   - the agent version compiled is an artefact in the object store, by
//     its hash, which the turn records and whose tools are what the model
//     was sent; its object deleted, the next turn compiles it again, to
//     the same hash, and stores it again.
func TestStrictToolsVersionsAndCompiledAgent(t *testing.T) {
	ctx := context.Background()
	bucket := devtest.ObjectStore(t)
	objects, err := objstore.New(ctx, bucket)
	require.NoError(t, err)
	issues := mcptest.StartHTTP(t, mcptest.Options{})
	srv := testserver.Start(t, testserver.Options{
		Script:            strictToolsScript,
		Catalogs:          []string{strings.NewReplacer("@URL", issues.URL, "@HOST", issues.Addr).Replace(strictToolsCatalog)},
		ObjectStoreConfig: bucket,
	})
	e := &dataEnv{env: &env{Server: srv, t: t}}

	res, _ := e.run(agent.TurnRequest{JobID: "strict-" + testserver.RandomID(), Prompt: "find the SSO issues"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "Found 2.", res.Output, "the server took the call: a null state would have been refused")
	require.Equal(t, 1, issues.Calls("search"))

	// At the wire: the tool went strict, state required and nullable.
	reqs := srv.Model.Requests()
	require.NotEmpty(t, reqs)
	require.Equal(t, []string{"gh_search"}, reqs[0].StrictTools)
	var sent []struct {
		Function struct {
			Name       string          `json:"name"`
			Strict     bool            `json:"strict"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	require.NoError(t, json.Unmarshal([]byte(reqs[0].ToolsJSON), &sent))
	require.Len(t, sent, 1)
	var params struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(sent[0].Function.Parameters, &params))
	require.ElementsMatch(t, []string{"query", "state"}, params.Required)
	require.Contains(t, string(params.Properties["state"]), `"null"`)

	// The steps: the call as the tool takes it (the model's null for the
	// optional state is the property left out, in the transcript and the
	// events too); the result names the definition that ran.
	steps, err := srv.Store().Steps(ctx, "demo", res.JobID)
	require.NoError(t, err)
	var call agent.ToolCall
	var result agent.Message
	for _, s := range steps {
		if len(s.ToolCalls) > 0 && s.Role == agent.RoleAssistant {
			call = s.ToolCalls[0]
		}
		if s.Role == agent.RoleTool {
			result = s
		}
	}
	require.JSONEq(t, `{"query":"SSO"}`, call.Arguments)
	require.NotNil(t, result.ToolVersion)
	var version int
	var hash string
	require.NoError(t, srv.Store().Pool().QueryRow(ctx,
		`SELECT t.active_version, v.spec_hash FROM tools t JOIN tool_versions v ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.active_version
		 WHERE t.tenant_id = 'demo' AND t.name = 'gh_search'`).Scan(&version, &hash))
	require.Equal(t, agent.ToolVersion{Version: version, SpecHash: hash}, *result.ToolVersion)
	pinned, err := srv.Store().AgentVersion(ctx, "demo", "triage", res.Metadata.AgentVersion)
	require.NoError(t, err)
	tool, ok := pinned.Tool("gh_search")
	require.True(t, ok)
	require.Equal(t, *result.ToolVersion, tool.VersionOf(), "the pinned agent version names the tool's version")

	// The compiled agent: in the object store by its hash, recorded by
	// the turn, holding what the model was sent.
	turn, err := srv.Store().Turn(ctx, "demo", res.JobID)
	require.NoError(t, err)
	compiled, err := srv.Store().CompiledAgent(ctx, "demo", "triage", res.Metadata.AgentVersion)
	require.NoError(t, err)
	require.Equal(t, compiled.Ref, turn.CompiledRef)
	require.Equal(t, store.CompiledKey(strings.TrimPrefix(compiled.Ref, agent.CASRefPrefix)), compiled.ObjectKey)
	var c agent.Compiled
	require.NoError(t, json.Unmarshal(compiled.Data, &c))
	require.Len(t, c.Tools, 1)
	require.JSONEq(t, string(c.Tools[0].Parameters), string(sent[0].Function.Parameters), "the model is sent the artefact's tools")
	require.True(t, c.Tools[0].Strict)
	require.Equal(t, *result.ToolVersion, c.Tools[0].ToolVersion)

	// Deleted, it is compiled again by the next turn, to the same hash.
	require.NoError(t, objects.Delete(ctx, compiled.ObjectKey))
	_, err = objects.Stat(ctx, compiled.ObjectKey)
	require.ErrorIs(t, err, objstore.ErrNotFound)
	again, _ := e.run(agent.TurnRequest{JobID: "strict-" + testserver.RandomID(), Prompt: "find the login issues"})
	require.Equal(t, agent.StatusCompleted, again.Status, "%+v", again.Error)
	_, err = objects.Stat(ctx, compiled.ObjectKey)
	require.NoError(t, err, "stored again")
	turn2, err := srv.Store().Turn(ctx, "demo", again.JobID)
	require.NoError(t, err)
	require.Equal(t, compiled.Ref, turn2.CompiledRef, "the same version compiles to the same artefact")
	recompiled, err := srv.Store().CompiledAgent(ctx, "demo", "triage", again.Metadata.AgentVersion)
	require.NoError(t, err)
	require.Equal(t, compiled.Data, recompiled.Data)
}
