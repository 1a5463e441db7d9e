package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestKnowledgeExample: the retrieve and prepare example of
// docs/guides/knowledge.md is a catalog the loader takes.
func TestKnowledgeExample(t *testing.T) {
	block := docYAML(t, "guides/knowledge.md", "Knowledge in turns: `retrieve`, `prepare` and citations")
	cat, err := Parse(testKinds(t), "knowledge.md", []byte(block))
	require.NoError(t, err)
	demo := cat.Tenants[0]
	require.Equal(t, agent.KindRetrieve, demo.Tools[0].Kind)
	p := demo.Agents[1].Prepare
	require.NotNil(t, p)
	require.True(t, p.Classify.On && p.Reformulate.On)
	require.Equal(t, []string{"handbook"}, p.Retrieve.Collections)
}
