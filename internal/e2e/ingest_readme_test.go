package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestKnowledgeRecipes runs the curl recipes of docs/concepts/knowledge.md
// and docs/guides/knowledge.md that call the collections' routes, in
// order and as written, and checks what they print: four documents
// ingested, one of each kind, the question's document found first, and
// one deleted.
func TestKnowledgeRecipes(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the recipes need %s", tool)
	}
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	blocks := docRecipes(t, func(b string) bool {
		return strings.Contains(b, "/v1/collections") || strings.Contains(b, "/v1/ingests")
	}, docSection{"concepts/knowledge.md", "Knowledge"}, docSection{"guides/knowledge.md", "Knowledge: collections, ingestion and retrieval"})
	require.Len(t, blocks, 2)
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: ingestScript, HTTPAPI: true,
		Tokens: map[string]string{token: "demo:user+approver+admin:dev"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+strings.Join(blocks, "\n"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "API=http://"+srv.HTTPAPIAddr(), "TOKEN="+token)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "handbook\ncompleted: 4 stored, 0 already there, 0 failed\nShipping\n204\nFerry, Shipping, Support\n", string(out))
}
