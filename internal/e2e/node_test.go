package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
	_, nodeErr := exec.LookPath("node")
	_, npmErr := exec.LookPath("npm")
	if nodeErr != nil || npmErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are needed to run %s's own client; install Node.js 18 or later", name)
		}
		t.Skipf("node and npm are not installed: %s's own client cannot be run (install Node.js 18 or later to run this test)", name)
	}
	src := filepath.Join("testdata", name)
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	require.NoError(t, err)
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	sum := sha256.Sum256(lock)
	dir := filepath.Join(cache, "agentflow", name+"-"+hex.EncodeToString(sum[:6]))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	files, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, f.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", module, "package.json")); err == nil {
		return dir
	}
	t.Logf("installing %s's client from the npm registry (npm ci, pinned by testdata/%s/package-lock.json) into %s", name, name, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci (%s's client, from the npm registry): %s", name, out)
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
