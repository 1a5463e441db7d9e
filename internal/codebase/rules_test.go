// Package codebase holds the rules agentflow's source tree keeps — how
// long a file or a function may grow, which packages may import which —
// and the count of its hand-written lines, so that they are checked by a
// test in `go tool task test` rather than remembered: size rules set by
// one change used to slip in the next.
//
// Check walks a tree and reports every file or function over its size
// and every import a rule forbids; Lines counts what the README's figure
// counts. The rules themselves are agentflow's (Agentflow); the package's
// own test shows they catch each kind of break in a small tree of its
// testdata.
package codebase

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Rules are what a tree keeps.
type Rules struct {
	// Module is the tree's module path, which imports of its own
	// packages start with.
	Module string
	// MaxFileLines bounds a hand-written non-test file, as `wc -l`
	// counts its lines.
	MaxFileLines int
	// MaxFuncLines bounds a function or method of one, from its func
	// line to its closing brace.
	MaxFuncLines int
	// Imports are the packages some packages may not import.
	Imports []ImportRule
}

// ImportRule forbids the packages matching From to import those
// matching Not, directly, in their non-test files. Patterns are paths
// relative to the module ("internal/agent"); a trailing "/..." matches
// the package and every one below it; Not may also name a package
// outside the module by its whole path ("github.com/jackc/pgx/v5/...").
// Except lists packages From matches that the rule leaves out, and
// Allow imports Not matches that the rule lets through.
type ImportRule struct {
	From   string
	Not    []string
	Except []string
	Allow  []string
	// Why is what the rule keeps, said in the report of a break.
	Why string
}

// Violation is one break of a rule.
type Violation struct {
	File string // relative to the tree's root, slash-separated
	Line int
	What string
}

func (v Violation) String() string { return fmt.Sprintf("%s:%d: %s", v.File, v.Line, v.What) }

// skipDir reports whether a directory holds no code of the tree's own:
// another module (tools/, with a go.mod of its own), npm packages, VCS
// data, testdata.
func skipDir(dir, name string) bool {
	if name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// source is a hand-written non-test Go file of the tree, parsed.
type source struct {
	rel  string // slash-separated, relative to the root
	pkg  string // its directory, relative to the root ("." for the root)
	data []byte
	fset *token.FileSet
	file *ast.File
}

// sources parses the tree's hand-written non-test Go files: generated
// files (a "Code generated … DO NOT EDIT." line) are left out.
func sources(root string) ([]source, error) {
	var out []source
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(p, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, data, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse: %w", err)
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		out = append(out, source{rel: rel, pkg: path.Dir(rel), data: data, fset: fset, file: f})
		return nil
	})
	return out, err
}

// Check reports every break of r in the tree at root, in file order.
func Check(root string, r Rules) ([]Violation, error) {
	srcs, err := sources(root)
	if err != nil {
		return nil, err
	}
	var out []Violation
	for _, s := range srcs {
		out = append(out, sizes(s, r)...)
		out = append(out, imports(s, r)...)
	}
	return out, nil
}

// sizes checks a file's length and its functions'.
func sizes(s source, r Rules) []Violation {
	var out []Violation
	if n := bytes.Count(s.data, []byte("\n")); r.MaxFileLines > 0 && n > r.MaxFileLines {
		out = append(out, Violation{File: s.rel, Line: 1, What: fmt.Sprintf("file of %d lines, over %d: split it by concern", n, r.MaxFileLines)})
	}
	for _, d := range s.file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || r.MaxFuncLines <= 0 {
			continue
		}
		from, to := s.fset.Position(fd.Pos()).Line, s.fset.Position(fd.End()).Line
		if n := to - from + 1; n > r.MaxFuncLines {
			out = append(out, Violation{File: s.rel, Line: from, What: fmt.Sprintf("func %s of %d lines, over %d", funcName(fd), n, r.MaxFuncLines)})
		}
	}
	return out
}

// funcName is a function's name, a method's with its receiver's type.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// imports checks a file's imports against the rules for its package.
func imports(s source, r Rules) []Violation {
	var out []Violation
	for _, rule := range r.Imports {
		if !match(rule.From, s.pkg) || slices.ContainsFunc(rule.Except, func(p string) bool { return match(p, s.pkg) }) {
			continue
		}
		for _, spec := range s.file.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				continue
			}
			own, ok := strings.CutPrefix(imp, r.Module+"/")
			if ok && slices.Contains(rule.Allow, own) {
				continue
			}
			for _, not := range rule.Not {
				if match(not, imp) || ok && match(not, own) {
					out = append(out, Violation{File: s.rel, Line: s.fset.Position(spec.Pos()).Line,
						What: fmt.Sprintf("%s imports %s: %s", s.pkg, imp, rule.Why)})
				}
			}
		}
	}
	return out
}

// match reports whether pkg is pattern's package, or below it when the
// pattern ends in "/...".
func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// Lines counts the tree's hand-written lines as the README does: the
// non-blank lines of its non-test, non-generated Go files.
func Lines(root string) (int, error) {
	srcs, err := sources(root)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range srcs {
		sc := bufio.NewScanner(bytes.NewReader(s.data))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				n++
			}
		}
		if err := sc.Err(); err != nil {
			return 0, fmt.Errorf("%s: %w", s.rel, err)
		}
	}
	return n, nil
}
