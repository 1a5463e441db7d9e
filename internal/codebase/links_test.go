package codebase

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// LinkRule forbids a package, with everything it links, to link the
// packages Never matches (patterns as ImportRule's, relative to the
// module or whole paths). The imports of the packages Through matches
// are not followed: they are the doors the rule allows (the catalog
// reaches Temporal only through the tool kinds). Import rules check what
// a package names; link rules what a binary carries.
type LinkRule struct {
	Root    string
	Never   []string
	Through []string
	// Only, when set, is all the root may link beside the standard
	// library and itself: anything else is a break.
	Only []string
	Why  string
}

// Links checks rule against the module at dir, with `go list -deps`; a
// break names one chain of imports from the root to what it links.
func Links(dir, module string, rule LinkRule) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Standard", "./"+rule.Root)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return nil, fmt.Errorf("go list %s: %w: %s", rule.Root, err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list %s: %w", rule.Root, err)
	}
	graph, std := map[string][]string{}, map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list %s: %w", rule.Root, err)
		}
		graph[p.ImportPath], std[p.ImportPath] = p.Imports, p.Standard
	}
	own := func(p string) string {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			return rel
		}
		return p
	}
	root := module + "/" + rule.Root
	paths := map[string][]string{root: {rule.Root}}
	queue := []string{root}
	var breaks []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		matches := func(n string) bool { return match(n, own(p)) || match(n, p) }
		unlisted := rule.Only != nil && p != root && !std[p] && !slices.ContainsFunc(rule.Only, matches)
		if slices.ContainsFunc(rule.Never, matches) || unlisted {
			breaks = append(breaks, fmt.Sprintf("%s links %s (%s): %s", rule.Root, own(p), strings.Join(paths[p], " → "), rule.Why))
			continue
		}
		if slices.ContainsFunc(rule.Through, func(n string) bool { return match(n, own(p)) }) {
			continue
		}
		for _, dep := range graph[p] {
			if _, seen := paths[dep]; !seen {
				paths[dep] = append(slices.Clone(paths[p]), own(dep))
				queue = append(queue, dep)
			}
		}
	}
	slices.Sort(breaks)
	return breaks, nil
}
