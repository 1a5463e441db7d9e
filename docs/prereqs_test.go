package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrerequisites: each prerequisite README.md's "Two commands" lists
// is checked by `go tool task prereqs` before the long builds of the
// tasks that need it, and a missing one is named with how to install it:
// it fails the task, except Node.js outside CI (its tests skip then).
// The checks run on a PATH that holds nothing, so what they find missing
// is what this machine would lack.
func TestPrerequisites(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section, ok := sectionOf(string(readme), "Two commands")
	require.True(t, ok)
	for _, want := range []string{"Go 1.26", "PostgreSQL server binaries", "C compiler", "Node.js 20", "npm", "Chromium", "`go tool task prereqs`"} {
		require.Contains(t, section, want, "README.md's prerequisites")
	}

	// Each task checks its own before anything long: prereqs is its
	// first command.
	taskfile, err := os.ReadFile("../Taskfile.yml")
	require.NoError(t, err)
	for task, need := range map[string]string{"demo": "postgres", "up": "postgres", "test": "postgres cc node"} {
		_, body, ok := strings.Cut(string(taskfile), "\n  "+task+":\n")
		require.True(t, ok, "Taskfile.yml has the task %s", task)
		_, cmds, ok := strings.Cut(body, "    cmds:\n")
		require.True(t, ok, "task %s has commands", task)
		require.True(t, strings.HasPrefix(cmds, "      - task: prereqs\n        vars: {NEED: "+need+"}\n"),
			"task %s checks %s first:\n%s", task, need, cmds)
	}

	out, err := exec.Command("go", "tool", "-n", "task").Output()
	require.NoError(t, err, "the task runner, as go tool task runs it")
	taskBin := strings.TrimSpace(string(out))
	empty := t.TempDir()
	// vars are the task's (NEED=, PGROOT=), env the environment's.
	prereqs := func(vars, env []string) (string, bool) {
		cmd := exec.Command(taskBin, append([]string{"--silent", "prereqs"}, vars...)...)
		cmd.Dir = ".."
		cmd.Env = append([]string{"PATH=" + empty, "HOME=" + os.Getenv("HOME"), "NO_COLOR=1"}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	noPostgres := "PGROOT=" + filepath.Join(empty, "postgresql")
	for _, tc := range []struct {
		name    string
		vars    []string
		env     []string
		ok      bool
		say     []string
		sayNone []string
	}{
		{"postgres", []string{"NEED=postgres", noPostgres}, nil, false, []string{"PostgreSQL server binaries", "apt-get install -y postgresql", "DATABASE_URL"}, nil},
		{"postgres elsewhere", []string{"NEED=postgres", noPostgres}, []string{"DATABASE_URL=postgres://db.example/agentflow"}, true, nil, []string{"PostgreSQL"}},
		{"a C compiler", []string{"NEED=cc"}, nil, false, []string{"C compiler (gcc)", "-race", "apt-get install -y gcc"}, nil},
		{"Node.js outside CI", []string{"NEED=node"}, nil, true, []string{"Node.js 20", "skip", "apt-get install -y nodejs npm"}, nil},
		{"Node.js under CI", []string{"NEED=node"}, []string{"CI=true"}, false, []string{"prerequisite missing: Node.js 20", "apt-get install -y nodejs npm"}, nil},
		{"all of the tests' at once", []string{"NEED=postgres cc node", noPostgres}, []string{"CI=true"}, false, []string{"PostgreSQL", "C compiler", "Node.js"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := prereqs(tc.vars, tc.env)
			require.Equal(t, tc.ok, ok, "%s", out)
			for _, s := range tc.say {
				require.Contains(t, out, s)
			}
			for _, s := range tc.sayNone {
				require.NotContains(t, out, s)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.HasPrefix(line, "task: ") || strings.Contains(line, "task: Failed") {
					continue // the runner's own word that the task failed
				}
				require.True(t, line == "" || strings.Contains(line, "Install"), "one line each, with the hint: %q", line)
			}
		})
	}
}
