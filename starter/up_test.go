package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestUpStopsOnInterrupt runs the built starter's `up`, as `task up` does,
// and stops it as Ctrl-C (SIGINT) or a service manager (SIGTERM) does: it
// ends with its own "agentflow stopped." line and exit status 0, so that
// `task up` ends without a failure of its own.
func TestUpStopsOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "starter")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	address, namespace := devtest.Temporal(t)
	env := append(os.Environ(), "DATABASE_URL="+devtest.Database(t), "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE="+namespace,
		"AGENTFLOW_HTTP_ADDR=off", "AGENTFLOW_GRPC_ADDR=127.0.0.1:0", "AGENTFLOW_HTTP_API_ADDR=127.0.0.1:0",
		"AGENTFLOW_FLIGHTS_ADDR=off", "AGENTFLOW_TOKENS=", "AGENTFLOW_SCRIPT=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "OLLAMA_HOST=")

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin, "up", "-catalog", "../catalog")
			cmd.Env = append(env, "AGENTFLOW_TASK_QUEUE=up-test-"+testserver.RandomID())
			var stdout lines
			cmd.Stdout = &stdout
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			require.Eventually(t, func() bool { return stdout.has("Press Ctrl-C to stop.") }, 3*time.Minute, 50*time.Millisecond,
				"up is running: %s", &stdout)
			require.NoError(t, cmd.Process.Signal(sig))
			err := cmd.Wait()
			require.NoError(t, err, "exit status 0\nstdout:\n%s\nstderr:\n%s", &stdout, stderr.String())
			require.Equal(t, stoppedLine, stdout.last(), "its own last line")
		})
	}
}

// lines is a process's output, read while it runs.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lines) has(line string) bool {
	s := bufio.NewScanner(strings.NewReader(l.String()))
	for s.Scan() {
		if s.Text() == line {
			return true
		}
	}
	return false
}

func (l *lines) last() string {
	all := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	return all[len(all)-1]
}
