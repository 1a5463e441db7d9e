package catalog

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImports: the catalog links no database package, and no Temporal
// package but through internal/tools and internal/approval (see the
// package doc). A pattern
// ending in "/..." names a package and everything under it, as go list's
// patterns do.
func TestImports(t *testing.T) {
	graph := importGraph(t)
	tests := []struct {
		name    string
		never   []string
		through []string // packages whose imports are not followed
	}{
		{"database", []string{
			"github.com/agentflow/agentflow/internal/store/...",
			"github.com/jackc/...",
			"github.com/lib/pq/...",
			"database/sql",
		}, nil},
		{"temporal", []string{"go.temporal.io/..."}, []string{
			"github.com/agentflow/agentflow/internal/tools",
			"github.com/agentflow/agentflow/internal/approval",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for dep, path := range graph.reach(tt.through) {
				for _, never := range tt.never {
					require.False(t, matches(never, dep), "catalog links %s: %s", dep, strings.Join(path, " → "))
				}
			}
		})
	}
}

// imports is a package graph as go list -deps -json reports it.
type imports struct {
	root string
	of   map[string][]string // package → its imports
}

func importGraph(t *testing.T) imports {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,DepOnly", ".").Output()
	require.NoError(t, err)
	g := imports{of: map[string][]string{}}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			DepOnly    bool
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		g.of[p.ImportPath] = p.Imports
		if !p.DepOnly {
			g.root = p.ImportPath
		}
	}
	require.Equal(t, "github.com/agentflow/agentflow/internal/catalog", g.root)
	return g
}

// reach returns every package the root links, each with one chain of
// imports from the root to it, not following the imports of through.
func (g imports) reach(through []string) map[string][]string {
	paths := map[string][]string{g.root: {g.root}}
	queue := []string{g.root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if slices.Contains(through, p) {
			continue
		}
		for _, dep := range g.of[p] {
			if _, seen := paths[dep]; !seen {
				paths[dep] = append(append([]string(nil), paths[p]...), dep)
				queue = append(queue, dep)
			}
		}
	}
	return paths
}

func matches(pattern, pkg string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == tree || strings.HasPrefix(pkg, tree+"/")
	}
	return pkg == pattern
}
