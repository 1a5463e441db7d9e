package tenant

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImports: tenant reads the store, never catalog files, and links
// nothing of the gateway, the activities or the workflows, which all hold
// a Cache (see the package doc).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	const module = "github.com/agentflow/agentflow/"
	require.Contains(t, deps, module+"internal/store")
	for _, never := range []string{"internal/catalog", "internal/gateway", "activities", "workflows"} {
		for _, dep := range deps {
			require.False(t, dep == module+never || strings.HasPrefix(dep, module+never+"/"), "tenant links %s", dep)
		}
	}
}
