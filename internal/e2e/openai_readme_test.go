package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestOpenAIResponsesApprovalRecipe runs docs/guides/openai.md's recipe of
// an approval on the Responses API, as written, against a server with the
// sample catalog and the demo model: agent ops's call waits as an
// mcp_approval_request item, an mcp_approval_response approves it, and
// the answer is the same response, completed, with the call's answer.
func TestOpenAIResponsesApprovalRecipe(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the recipes need %s", tool)
	}
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	blocks := docRecipes(t, func(b string) bool { return strings.Contains(b, "mcp_approval_response") }, httpSections...)
	require.Len(t, blocks, 1)
	demo, err := os.ReadFile(filepath.Join(root, "catalog", "demo.yaml"))
	require.NoError(t, err)
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: string(scripted.DemoYAML()), Catalogs: []string{string(demo)},
		Tokens: map[string]string{token: "demo:user+approver:dev"}, HTTPAPI: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+blocks[0])
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "API=http://"+srv.HTTPAPIAddr(), "TOKEN="+token)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "true\ncompleted\nmcp_approval_request mcp_call message\n5 * 6 = 30\n", string(out))
}
