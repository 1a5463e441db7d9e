package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestREADMEKnowledge: the README's retrieve and prepare example is a
// catalog the loader takes.
func TestREADMEKnowledge(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "### Knowledge in turns")
	require.True(t, ok, "the README shows retrieve and prepare")
	_, block, ok := strings.Cut(after, "```yaml\n")
	require.True(t, ok)
	block, _, _ = strings.Cut(block, "```")
	cat, err := Parse(testKinds(t), "README.md", []byte(block))
	require.NoError(t, err)
	demo := cat.Tenants[0]
	require.Equal(t, agent.KindRetrieve, demo.Tools[0].Kind)
	p := demo.Agents[1].Prepare
	require.NotNil(t, p)
	require.True(t, p.Classify.On && p.Reformulate.On)
	require.Equal(t, []string{"handbook"}, p.Retrieve.Collections)
}
