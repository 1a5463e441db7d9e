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

// TestGRPCReadmeRecipes runs the grpcurl recipe of docs/guides/grpc.md's
// "The gRPC API", as written (`go tool task grpcurl` included), against a
// server with the sample catalog and the demo model, its gateway and
// token in the two variables the page exports, and checks what it
// prints: AgentService's methods by reflection, then a streamed turn's
// answer and its last status.
func TestGRPCReadmeRecipes(t *testing.T) {
	for _, tool := range []string{"bash", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the recipes need %s", tool)
	}
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Built here under the tools' lock, so that test binaries running at
	// once build it once; the recipe's task then finds it built.
	_, err = devstack.Tool(ctx, root, "tools/grpcurl", "grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	require.NoError(t, err)

	blocks := docRecipes(t, func(b string) bool { return strings.Contains(b, "grpcurl") }, docSection{"guides/grpc.md", "The gRPC API"})
	require.Len(t, blocks, 1)
	require.Contains(t, blocks[0], "go tool task grpcurl\n", "the recipe builds what it runs")
	demo, err := os.ReadFile(filepath.Join(root, "catalog", "demo.yaml"))
	require.NoError(t, err)
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: string(scripted.DemoYAML()), Catalogs: []string{string(demo)},
		Tokens: map[string]string{token: "demo:user:dev"}})
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+blocks[0])
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "AGENTFLOW_GRPC_ADDR="+srv.GRPCAddr(), "AGENTFLOW_TOKEN="+token)
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	t.Logf("the recipe prints:\n%s", out)
	got := string(out)
	require.Contains(t, got, "agentflow.v1.AgentService.Stream\n", "the methods, by reflection")
	require.Contains(t, got, "agentflow.v1.AgentService.Approve\n")
	require.True(t, strings.HasSuffix(got, "12.5 * 4 = 50\nSTATUS_COMPLETED\n"), "the answer and the last status: %q", got)
}
