package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/nodeclient"
	"github.com/stretchr/testify/require"
)

// nodeClient is a directory with a protocol's own Node.js client
// installed: testdata/<name>'s files (a package.json, the package-lock.json
// that pins every package, and the scripts that drive the client), with
// `npm ci` run once per lockfile and kept in the user's cache between
// runs. module is a package the lockfile installs, whose presence says
// the install is done. Without Node.js the test skips, and fails under
// CI=true.
func nodeClient(t *testing.T, name, module string) string {
	t.Helper()
	return nodeClientAt(t, filepath.Join("testdata", name), module)
}

// nodeClientAt is nodeClient for the files of src, a folder of the
// repository (an example's).
func nodeClientAt(t *testing.T, src, module string) string {
	t.Helper()
	name := filepath.Base(src)
	if !nodeclient.Installed() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are needed to run %s's own client; install Node.js 18 or later", name)
		}
		t.Skipf("node and npm are not installed: %s's own client cannot be run (install Node.js 18 or later to run this test)", name)
	}
	dir, err := nodeclient.Install(context.Background(), src, "agentflow", module)
	require.NoError(t, err, "%s's client", name)
	return dir
}

// runNode runs a script of a Node.js client's directory with in on its
// stdin, and returns its stdout; the script must exit 0.
func runNode(t *testing.T, dir, script string, in []byte) []byte {
	t.Helper()
	return startNode(t, dir, script, in)()
}

// startNode starts what runNode runs, and returns the function that
// waits for its end and returns its stdout.
func startNode(t *testing.T, dir, script string, in []byte) (wait func() []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		require.NoError(t, err)
	}
	return func() []byte {
		t.Helper()
		defer cancel()
		require.NoError(t, cmd.Wait(), "%s", stderr.String())
		return stdout.Bytes()
	}
}

// nodeInput is v in JSON, a Node.js script's input.
func nodeInput(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}
