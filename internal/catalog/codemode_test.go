package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/agent"
)

// TestParseCodeMode: an agent's code_mode as the catalog writes it,
// true resolved into the agent's tools, and each bad value a clear
// problem at its line.
func TestParseCodeMode(t *testing.T) {
	kinds := testKinds(t)
	head := "tenant: demo\ntools:\n  - {name: add, kind: calculator}\n  - {name: lookup, kind: calculator}\n  - {name: ask, kind: ask_user}\n" +
		"  - {name: get-total, kind: calculator}\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    tools: [add, lookup, ask, get-total]\n"
	cat, err := Parse(kinds, "t.yaml", []byte(head+"    code_mode: {tools: [add], time_sec: 10, max_calls: 50, max_output_bytes: 4096}\n"))
	require.NoError(t, err)
	require.Equal(t, &agent.CodeMode{Tools: []string{"add"}, TimeSec: 10, MaxCalls: 50, MaxOutputBytes: 4096}, cat.Tenants[0].Agents[0].CodeMode)

	cat, err = Parse(kinds, "t.yaml", []byte(head+"    code_mode: true\n"))
	require.NoError(t, err)
	require.Equal(t, &agent.CodeMode{Tools: []string{"add", "lookup"}}, cat.Tenants[0].Agents[0].CodeMode,
		"every tool a program can call: not ask_user, which only the model calls, nor get-total, which it cannot name")

	cat, err = Parse(kinds, "t.yaml", []byte(head+"    code_mode: false\n"))
	require.NoError(t, err)
	require.Nil(t, cat.Tenants[0].Agents[0].CodeMode)

	for _, tc := range []struct{ mode, want string }{
		{"{tools: []}", "tools is empty"},
		{"{tools: [nope]}", `tool "nope" is not one of agent "a"'s tools`},
		{"{tools: [ask]}", `tool "ask" is of kind ask_user, which only the model calls`},
		{"{tools: [add-one]}", "is not a JavaScript identifier"},
		{"{tools: [add, add]}", "listed twice"},
		{"{tools: [add], time_sec: 61}", "61 is over the limit of 60 seconds"},
		{"{tools: [add], max_calls: 10001}", "10001 is over the limit of 10000"},
		{"{tools: [add], max_output_bytes: 16777217}", "over the limit of 16777216"},
		{"{tools: [add], max_calls: -1}", "must not be negative"},
		{"{tools: [add], memory: 5}", `unknown field "memory"`},
		{"yes please", "want true, or {tools"},
	} {
		_, err := Parse(kinds, "t.yaml", []byte(head+"    code_mode: "+tc.mode+"\n"))
		require.ErrorContains(t, err, "t.yaml:11: agents[0].code_mode", tc.mode)
		require.ErrorContains(t, err, tc.want, tc.mode)
	}
}

// TestReadmeCodeModeCatalog: the catalog of docs/guides/code-mode.md
// loads, with its code mode.
func TestReadmeCodeModeCatalog(t *testing.T) {
	block := docYAML(t, "guides/code-mode.md", "Code mode")
	c, err := Parse(testKinds(t), "code-mode.md", []byte(block))
	require.NoError(t, err, block)
	require.Equal(t, &agent.CodeMode{Tools: []string{"calculator", "fetch"}, MaxCalls: 200}, c.Tenants[0].Agents[0].CodeMode)
}

// docYAML is the first YAML block under the heading title of the docs
// page at name.
func docYAML(t *testing.T, name, title string) string {
	t.Helper()
	section, err := docs.Section(name, title)
	require.NoError(t, err)
	blocks := docs.Blocks(section, "yaml")
	require.NotEmpty(t, blocks, "%s shows a catalog under %q", name, title)
	return blocks[0]
}
