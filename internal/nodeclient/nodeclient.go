// Package nodeclient installs the Node.js clients tests drive a door with:
// a folder of testdata (package.json, the package-lock.json that pins every
// package, the scripts that drive the client) copied into the user's cache
// and `npm ci` run there once per lockfile.
//
// Only tests import it, and it imports nothing of agentflow's.
//
// Test processes run side by side on one machine (the packages of `go test
// ./...`, the shards of one package), so an install holds a file lock: two
// processes never run `npm ci` into one folder, nor rewrite a script another
// is running.
package nodeclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentflow/agentflow/internal/devstack"
)

// Installed reports whether node and npm are on the PATH.
func Installed() bool {
	_, nodeErr := exec.LookPath("node")
	_, npmErr := exec.LookPath("npm")
	return nodeErr == nil && npmErr == nil
}

// Install returns a folder of the user's cache (under cacheDir) holding the
// files of src and, once per lockfile, what `npm ci` installs from them.
// module is a package the lockfile installs, whose presence says the
// install is done.
func Install(ctx context.Context, src, cacheDir, module string) (string, error) {
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(cache, cacheDir, filepath.Base(src)+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockDir(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := copyFiles(src, dir); err != nil {
		return "", err
	}
	// The marker is written once npm ci has succeeded: an install cut
	// short (a full disk, a killed test) leaves module's files without
	// it, and is made again.
	done := filepath.Join(dir, "node_modules", ".agentflow-installed")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", module, "package.json")); err == nil {
		if _, err := os.Stat(done); err == nil {
			return dir, nil
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci (pinned by %s): %w: %s", filepath.Join(src, "package-lock.json"), err, out)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// copyFiles copies the files of src into dir, each only when it differs,
// through a rename, so a script another process runs is never half written.
func copyFiles(src, dir string) error {
	files, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, f.Name())
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			continue
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	return nil
}

// lockDir takes an exclusive flock on path, waiting until it is free or
// ctx ends, and returns its release.
func lockDir(ctx context.Context, path string) (func(), error) {
	f, err := devstack.LockFile(ctx, path, true)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Stop stops a long-running Node.js process the way its SDK expects, so
// it leaves nothing behind: SIGTERM (a Temporal worker shuts down on it),
// then SIGKILL once grace has passed.
func Stop(cmd *exec.Cmd, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
