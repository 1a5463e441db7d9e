package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestParsePrepare: an agent's prepare phase as the catalog writes it,
// and each bad field a clear problem at its line.
func TestParsePrepare(t *testing.T) {
	head := "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	cat, err := Parse(nil, "t.yaml", []byte(head+"    prepare:\n      classify: {model: openai:gpt-4o-mini, labels: [question, code, conversation]}\n      reformulate: true\n      retrieve: {collections: [handbook], top_k: 3, budget: 800}\n"))
	require.NoError(t, err)
	p := cat.Tenants[0].Agents[0].Prepare
	require.NotNil(t, p)
	require.Equal(t, []string{"question", "code", "conversation"}, p.Classify.LabelsOrDefault())
	require.True(t, p.Reformulate.On)
	require.Equal(t, "openai:gpt-4o-mini", p.Reformulate.ModelOr("openai:gpt-4o-mini"))
	require.Equal(t, agent.Retrieval{Collections: []string{"handbook"}, TopK: 3, Budget: 800}, *p.Retrieve)

	for _, tc := range []struct{ prepare, want string }{
		{"{}", "name at least one of classify, reformulate and retrieve"},
		{"{classify: yes}", "want true, false or {model, labels}"},
		{"{classify: {model: gpt}}", "prepare.classify.model"},
		{"{classify: {labels: [only]}}", "1 labels; want 2 to 16"},
		{"{retrieve: {collections: [handbook], top_k: 0}}", "prepare.retrieve: top_k 0: want 1 to 50"},
		{"{retrieve: {collections: [handbook], budget: 20000}}", "prepare.retrieve: budget 20000: want 1 to 16000"},
		{"{retrieve: {top_k: 3}}", "prepare.retrieve: collections is required"},
		{"{rerank: true}", `unknown field "rerank"`},
	} {
		_, err := Parse(nil, "t.yaml", []byte(head+"    prepare: "+tc.prepare+"\n"))
		require.ErrorContains(t, err, "t.yaml:5: agents[0].prepare: ", tc.prepare)
		require.ErrorContains(t, err, tc.want, tc.prepare)
	}
}
