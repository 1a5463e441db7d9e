package memory

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImports: what memory is can be read alone — the package links the
// domain and the standard library, nothing else (see the package doc).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	require.NoError(t, err)
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/agentflow/agentflow/internal/memory" {
			deps = append(deps, p)
		}
	}
	require.Equal(t, []string{"github.com/agentflow/agentflow/internal/agent"}, deps)
}
