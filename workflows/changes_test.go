package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// versionMarker is the marker workflow.GetVersion records (the SDK's
// name for it, stored in every history that passed a gate).
const versionMarker = "Version"

// retiredChanges are the ids of AgentTurn's gates from before it was
// Pinned. Histories recorded then still hold their markers; the SDK skips
// a version marker no code asks for, so those histories replay on the
// turn's code as it is, which takes every gate's new way.
var retiredChanges = []string{
	"durable-database-steps", "tenant-matches-workflow-id", "cancel-turn", "stop-keeps-partial", "steer-turn",
	"approval-complete", "local-tools-outlast-database", "bounded-context", "delegate-to-agent",
	"cancel-tools-in-flight", "notify-own-tenant", "workflow-streams", "event-vocabulary", "fallback-models",
	"structured-output", "model-override", "job-envelope", "live-first-streaming", "ask-user", "tool-limits",
	"approval-grants", "conversation-turn-events",
}

// gatedFiles are the files whose code may call workflow.GetVersion: the
// code of Conversation, whose runs outlive a deploy. A turn's or an
// evaluation's code is pinned to its build and has no gates (doc.go).
var gatedFiles = []string{"conversation.go", "conversation_stream.go", "memory.go"}

var (
	historyRef = regexp.MustCompile(`testdata/[A-Za-z0-9_]+\.json`)
	testRef    = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9]*`)
)

// TestChangeIDs holds changes.go to the code and the histories: every
// workflow.GetVersion in the package names a change id declared there
// (directly, or through a parameter its every caller fills with one);
// each id there is distinct and gates something; each names the recorded
// histories that write its marker, all of them, or else workflow tests
// that exist; and no history has a marker of an id not declared there.
func TestChangeIDs(t *testing.T) {
	fset := token.NewFileSet()
	files := parsePackage(t, fset)
	changes := declaredChanges(t, files["changes.go"])
	require.NotEmpty(t, changes)
	values := map[string]string{}
	for name, c := range changes {
		require.NotContains(t, values, c.id, "%s and %s have the same id", name, values[c.id])
		values[c.id] = name
	}

	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for name := range changes {
		require.Contains(t, string(doc), name, "doc.go lists the gates that remain: %s is not among them", name)
	}

	used := gatedChanges(t, fset, files, changes)
	for name := range changes {
		require.True(t, used[name], "%s is declared in changes.go but no workflow.GetVersion uses it", name)
	}

	markers := recordedMarkers(t)
	for id, histories := range markers {
		if slices.Contains(retiredChanges, id) {
			continue
		}
		require.Contains(t, values, id, "%v record a marker of change %q, which changes.go does not declare", histories, id)
	}
	tests := testNames(t, fset)
	for name, c := range changes {
		t.Run(c.id, func(t *testing.T) {
			require.Contains(t, c.doc, "Recorded:", "the comment of %s says which recorded history covers it", name)
			listed := historyRef.FindAllString(c.doc, -1)
			slices.Sort(listed)
			if len(listed) > 0 || len(markers[c.id]) > 0 {
				require.Equal(t, markers[c.id], listed, "the comment of %s names every history in testdata/ that records its marker, and no other", name)
				return
			}
			require.Contains(t, c.doc, "Recorded: none", "%s: no history records its marker", name)
			named := testRef.FindAllString(c.doc, -1)
			require.NotEmpty(t, named, "%s has no recorded history: its comment names the workflow tests that run its new way", name)
			for _, test := range named {
				require.Contains(t, tests, test, "the comment of %s names a test this package does not have", name)
			}
		})
	}
}

// parsePackage parses the package's own files (not its tests), by name.
func parsePackage(t *testing.T, fset *token.FileSet) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	require.NoError(t, err)
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		require.NoError(t, err)
		files[p] = f
	}
	require.Contains(t, files, "changes.go")
	return files
}

type change struct {
	id  string // the value: what histories store
	doc string
}

// declaredChanges returns the string constants of changes.go by name.
func declaredChanges(t *testing.T, f *ast.File) map[string]change {
	t.Helper()
	changes := map[string]change{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			spec := s.(*ast.ValueSpec)
			for i, name := range spec.Names {
				lit, ok := spec.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "%s: a change id is a string literal", name.Name)
				id, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				changes[name.Name] = change{id: id, doc: spec.Doc.Text()}
			}
		}
	}
	return changes
}

// gatedChanges checks the change id of every workflow.GetVersion call and
// returns the changes.go constants they use. An id passed in through a
// parameter of the function that calls GetVersion is checked at each
// call of that function.
func gatedChanges(t *testing.T, fset *token.FileSet, files map[string]*ast.File, changes map[string]change) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	through := map[string]int{} // function name → index of its change id parameter
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isGetVersion(call) {
					return true
				}
				at := fset.Position(call.Pos())
				require.Contains(t, gatedFiles, filepath.Base(at.Filename), "%s: only Conversation's code has gates; AgentTurn and Evaluation are pinned (doc.go)", at)
				require.Len(t, call.Args, 4, "%s: workflow.GetVersion(ctx, changeID, min, max)", at)
				id, ok := call.Args[1].(*ast.Ident)
				require.True(t, ok, "%s: the change id is a constant declared in changes.go", at)
				if _, ok := changes[id.Name]; ok {
					used[id.Name] = true
					return true
				}
				i := paramIndex(fn, id.Name)
				require.GreaterOrEqual(t, i, 0, "%s: change id %s is not declared in changes.go", at, id.Name)
				through[fn.Name.Name] = i
				return true
			})
		}
	}
	for fn, i := range through {
		callers := 0
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || calledName(call) != fn {
					return true
				}
				callers++
				at := fset.Position(call.Pos())
				require.Greater(t, len(call.Args), i, "%s", at)
				id, ok := call.Args[i].(*ast.Ident)
				require.True(t, ok, "%s: %s's change id is a constant declared in changes.go", at, fn)
				_, declared := changes[id.Name]
				require.True(t, declared, "%s: change id %s, given to %s, is not declared in changes.go", at, id.Name, fn)
				used[id.Name] = true
				return true
			})
		}
		require.Positive(t, callers, "%s passes its change id parameter to workflow.GetVersion but is never called", fn)
	}
	return used
}

func isGetVersion(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "GetVersion" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "workflow"
}

// calledName is the name of the function or method a call calls.
func calledName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// paramIndex is the position of the parameter named name in fn's
// parameters, or -1.
func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// recordedMarkers returns, for each change id, the histories in testdata/
// that record its version marker, sorted.
func recordedMarkers(t *testing.T) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	markers := map[string][]string{}
	dc := converter.GetDefaultDataConverter()
	for _, p := range paths {
		f, err := os.Open(p)
		require.NoError(t, err)
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		require.NoError(t, f.Close())
		require.NoError(t, err, p)
		for _, e := range h.GetEvents() {
			m := e.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != versionMarker {
				continue
			}
			var id string
			require.NoError(t, dc.FromPayloads(m.GetDetails()["change-id"], &id), p)
			if !slices.Contains(markers[id], p) {
				markers[id] = append(markers[id], p)
			}
		}
	}
	for _, ps := range markers {
		slices.Sort(ps)
	}
	return markers
}

// testNames returns the names of the package's test functions.
func testNames(t *testing.T, fset *token.FileSet) []string {
	t.Helper()
	paths, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}
