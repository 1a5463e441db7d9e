package nodeclient

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLockDirWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir.lock")
	unlock, err := lockDir(context.Background(), path)
	require.NoError(t, err)

	// A second taker waits while the lock is held, and gives up with its
	// context.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = lockDir(ctx, path)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	unlock()
	again, err := lockDir(context.Background(), path)
	require.NoError(t, err)
	again()
}

func TestCopyFilesRewritesOnlyWhatChanged(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.mjs"), []byte("one"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "b.mjs"), []byte("two"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(src, "node_modules"), 0o755))
	require.NoError(t, copyFiles(src, dst))

	old := time.Now().Add(-time.Hour)
	for _, name := range []string{"a.mjs", "b.mjs"} {
		require.NoError(t, os.Chtimes(filepath.Join(dst, name), old, old))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "b.mjs"), []byte("three"), 0o644))
	require.NoError(t, copyFiles(src, dst))

	a, err := os.Stat(filepath.Join(dst, "a.mjs"))
	require.NoError(t, err)
	require.True(t, a.ModTime().Equal(old), "an unchanged file is not rewritten")
	b, err := os.ReadFile(filepath.Join(dst, "b.mjs"))
	require.NoError(t, err)
	require.Equal(t, "three", string(b))
	_, err = os.Stat(filepath.Join(dst, "node_modules"))
	require.ErrorIs(t, err, os.ErrNotExist, "folders are not copied")
}
