package catalog

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// Kinds looks up tool kinds by name; *tools.Registry satisfies it.
type Kinds interface {
	Kind(name string) (tools.Kind, bool)
	// Deps are what the kinds' Build and Resolve get: the worker's, so
	// that what it allows (the commands stdio MCP servers may run) is
	// checked when a catalog is applied.
	Deps() tools.Deps
}

// LoadFiles reads and validates catalog files. A path may be a directory:
// then every *.yaml and *.yml file directly in it is read, in name order.
// A file that cannot be read is an ordinary error; problems with the
// catalog itself are returned together as a *ValidationError.
func LoadFiles(kinds Kinds, paths ...string) (agent.Catalog, error) {
	if len(paths) == 0 {
		return agent.Catalog{}, fmt.Errorf("load catalog: no files given")
	}
	l := newLoader(kinds)
	for _, path := range paths {
		files, err := Files(path)
		if err != nil {
			return agent.Catalog{}, fmt.Errorf("load catalog: %w", err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return agent.Catalog{}, fmt.Errorf("load catalog: %w", err)
			}
			l.file(f, data)
		}
	}
	return l.finish()
}

// ParseFiles validates several files' contents, by name, read in name
// order as one catalog.
func ParseFiles(kinds Kinds, files map[string][]byte) (agent.Catalog, error) {
	if len(files) == 0 {
		return agent.Catalog{}, fmt.Errorf("load catalog: no files given")
	}
	l := newLoader(kinds)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		l.file(n, files[n])
	}
	return l.finish()
}

// Parse validates one catalog file's contents; name is used in problems.
func Parse(kinds Kinds, name string, data []byte) (agent.Catalog, error) {
	l := newLoader(kinds)
	l.file(name, data)
	return l.finish()
}

// Files expands a catalog path: a file is itself, a directory is every
// *.yaml and *.yml file directly in it, in name order.
func Files(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml or *.yml files", path)
	}
	return files, nil
}

// Problem is one thing wrong with a catalog.
type Problem struct {
	File    string
	Line    int    // 1-based; 0 when unknown
	Field   string // path of the field, e.g. "agents[0].model"; empty for the document
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError lists every problem found in a catalog, in file and line
// order.
type ValidationError struct {
	Problems []Problem
}

// Error lists the problems one per line, as file:line: field: message.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
