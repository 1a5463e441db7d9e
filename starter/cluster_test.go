package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/cluster"
)

// TestUpCluster runs the built starter's `up --cluster`, as `task cluster`
// does: a turn through the gateways' address it prints, then Ctrl-C stops
// it, and its hosts are gone.
func TestUpCluster(t *testing.T) {
	if err := cluster.Available(); err != nil {
		t.Skip(err) // only root makes hosts; CI runs as root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "starter")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "up", "--cluster", "-catalog", "../catalog", "-state", state)
	// Not the test stack's (`task test` runs under `starter stack`): the
	// cluster starts its own, and the scripted model answers.
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "TEMPORAL_ADDRESS=", "AGENTFLOW_TOKENS=", "AGENTFLOW_SCRIPT=",
		"AGENTFLOW_DEMO_MODEL=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "OLLAMA_HOST=")
	var stdout lines
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", &stdout, stderr.String())
		}
	})
	for !stdout.has("Press Ctrl-C to stop.") {
		select {
		case err := <-exited:
			t.Fatalf("up --cluster exited before it ran: %v", err)
		case <-ctx.Done():
			t.Fatal("up --cluster did not start in time")
		case <-time.After(200 * time.Millisecond):
		}
	}

	api := regexp.MustCompile(`gRPC API:\s+(\S+) \(token (\S+) for tenant demo`).FindStringSubmatch(stdout.String())
	require.NotNil(t, api, "the gateways' address and a token are printed")
	chat := exec.CommandContext(ctx, bin, "chat", "--addr", api[1], "--token", api[2], "What is 12.5 * 4?")
	answer, err := chat.CombinedOutput()
	require.NoError(t, err, "%s", answer)
	require.Contains(t, string(answer), "12.5 * 4 = 50")
	gateway := regexp.MustCompile(`this machine is (\S+) on it`).FindStringSubmatch(stdout.String())
	require.NotNil(t, gateway, "the hosts' network is printed")
	require.Regexp(t, `worker-3\s+\d+\.\d+\.\d+\.\d+\s+worker`, stdout.String(), "and each host with its address")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, <-exited, "exit status 0")
	require.Equal(t, stoppedLine, stdout.last(), "its own last line")
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	require.NoError(t, err, "%s", addrs)
	require.NotContains(t, string(addrs), " "+gateway[1]+"/", "the network is removed")
	for _, log := range []string{"worker-3.log", "gateway-2.log", "temporal-history-2.log", "postgres-pg-2.log"} {
		require.FileExists(t, filepath.Join(state, log))
	}
}

// Without root, up --cluster says why and starts nothing.
func TestUpClusterNeedsRoot(t *testing.T) {
	if cluster.Available() == nil {
		t.Skip("root makes hosts: TestUpCluster runs")
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"up", "--cluster", "-catalog", "../catalog"}, &out)
	require.ErrorContains(t, err, "--cluster runs each part on a host of its own: cluster: network namespaces need root")
	require.Empty(t, out.String(), "nothing started")
}
