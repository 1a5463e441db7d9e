package tools

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocDescribesEveryKind: the package doc's list of built-in kinds
// names each kind Builtin returns, so that a new kind is described where
// a reader looks for the kinds.
func TestDocDescribesEveryKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	doc := f.Doc.Text()
	_, list, ok := strings.Cut(doc, "# Built-in kinds")
	require.True(t, ok, "doc.go has a section # Built-in kinds")
	list, _, _ = strings.Cut(list, "\n# ")
	for _, k := range Builtin() {
		require.Contains(t, list, "\n  - "+k.Name+" (", "doc.go's # Built-in kinds describes %s", k.Name)
	}
}
