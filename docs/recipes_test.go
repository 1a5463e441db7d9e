package docs

import (
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// environment are the variables a reader's shell has before any recipe:
// a page need not define them.
var environment = []string{"HOME", "PATH", "PWD", "USER", "TMPDIR"}

// TestRecipesDefineWhatTheyUse reads each page's shell recipes on their
// own, top to bottom, as a reader who opened that page alone would type
// them: every variable a recipe uses ($API, ${JOB}) is defined on that
// page before it (an export block, an assignment, a for or read), so no
// recipe leans on a variable that another page, or the tests that run the
// recipes, set.
func TestRecipesDefineWhatTheyUse(t *testing.T) {
	root := os.DirFS("..")
	files := append([]string(nil), linkedFiles...)
	for _, dir := range linkedFolders {
		require.NoError(t, fs.WalkDir(root, dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return err
		}))
	}
	checked := 0
	for _, name := range files {
		data, err := fs.ReadFile(root, name)
		require.NoError(t, err)
		blocks := Blocks(string(data), "sh")
		checked += len(blocks)
		for _, v := range undefinedVars(blocks) {
			t.Errorf("%s: a recipe uses $%s, which no recipe of the page defines before it", name, v)
		}
	}
	require.Greater(t, checked, 50, "the recipes were found")
}

// TestUndefinedVars: the reading TestRecipesDefineWhatTheyUse relies on.
func TestUndefinedVars(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks []string
		want   []string
	}{
		{"used before defined", []string{`curl "$API/v1/agents"`, "export API=http://127.0.0.1:8080\n"}, []string{"API"}},
		{"an export block first", []string{"export API=http://x TOKEN=dev-token\n", `curl -H "Authorization: Bearer $TOKEN" "$API/v1"`}, nil},
		{"an assignment from a command", []string{"JOB=$(curl -sS \"$API\" | jq -r .id)\necho \"$JOB\" ${JOB}-2\n"}, []string{"API"}},
		{"single quotes do not expand", []string{`jq -r '.[] | select(.x == $x)' --arg x 1`}, nil},
		{"a multi-line single-quoted body", []string{"curl -d '{\n  \"a\": \"$NOPE\"\n}' \"$URL\"\n"}, []string{"URL"}},
		{"double quotes expand", []string{`echo "the $NAME"`}, []string{"NAME"}},
		{"a comment", []string{"# set $TOKEN first\necho hi # then $API\n"}, nil},
		{"for and read", []string{"for id in a b; do echo $id; done\ncurl x | while read -r line; do echo \"$line\"; done\n"}, nil},
		{"an escaped dollar", []string{`echo "costs \$5 or \$ALL"`}, nil},
		{"specials and positionals", []string{`echo $? $1 $@ $#`}, nil},
		{"the environment", []string{`ls "$HOME" $PATH`}, nil},
		{"a default", []string{`"${EDITOR:-vi}" f; echo ${X-x} ${Y:=y} ${Z#a} ${W}`}, []string{"Z", "W"}},
		{"a quoted heredoc does not expand", []string{"cat <<'EOF'\n$NOPE\nEOF\necho $AFTER\n"}, []string{"AFTER"}},
		{"a prefix assignment", []string{"AGENTFLOW_TOKEN=t go run ./starter chat hi\n"}, nil},
		{"each once", []string{"echo $A $A\necho $A\n"}, []string{"A"}},
		{"single quotes in a substitution in double quotes", []string{`curl "$API/f/$(jq -rn --arg r "$REF" '$r | @uri')"`}, []string{"API", "REF"}},
		{"a substitution's single quotes over lines", []string{"X=1\ncurl -d \"$(jq -n --arg p \"$X\" '{a: 1,\n  b: $p}')\" \"$U\"\n"}, []string{"U"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, undefinedVars(tc.blocks))
		})
	}
}

var (
	// defRE is an assignment at a word's start (NAME=…, export A=1 B=2).
	defRE = regexp.MustCompile(`(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=`)
	// loopRE is a for loop's variable or read's.
	loopRE = regexp.MustCompile(`\b(?:for|read(?:\s+-[a-z]+)*)\s+([A-Za-z_][A-Za-z0-9_]*)`)
	// useRE is an expansion: $NAME or ${NAME…}; ${NAME:-default} (or
	// :=, - and =) has a value of its own when NAME has none.
	useRE = regexp.MustCompile(`\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(:?[-=])?)`)
	// heredocRE opens a quoted heredoc, whose body is not expanded.
	heredocRE = regexp.MustCompile(`<<-?\s*['"]([A-Za-z_]+)['"]`)
)

// undefinedVars returns the variables the shell blocks use before any of
// them defines them, in the order first used, each once. It reads the
// blocks as the shell would for this purpose only: single-quoted text, a
// quoted heredoc's body, comments and \$ do not expand; an assignment,
// export, for or read defines.
func undefinedVars(blocks []string) []string {
	defined := map[string]bool{}
	for _, v := range environment {
		defined[v] = true
	}
	var out []string
	for _, block := range blocks {
		var q quoting
		heredoc := ""
		for _, line := range strings.Split(block, "\n") {
			if heredoc != "" {
				if strings.TrimSpace(line) == heredoc {
					heredoc = ""
				}
				continue
			}
			text := q.expanded(line)
			if m := heredocRE.FindStringSubmatch(line); m != nil && !q.single {
				heredoc = m[1]
			}
			// A loop's variable is used after its definition on the same
			// line; an assignment's right side (X=$(… $X …)) before it.
			for _, m := range loopRE.FindAllStringSubmatch(text, -1) {
				defined[m[1]] = true
			}
			for _, m := range useRE.FindAllStringSubmatch(text, -1) {
				name := m[1] + m[2]
				if m[3] == "" && !defined[name] && !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
			for _, m := range defRE.FindAllStringSubmatch(text, -1) {
				defined[m[1]] = true
			}
		}
	}
	return out
}

// quoting is where a shell reader is between the lines of a block: in a
// single-quoted string, and in which double quotes of which command
// substitutions ($( … ) inside "…" quotes afresh).
type quoting struct {
	single bool
	frames []frame // the open command substitutions, innermost last
	double bool    // in double quotes, in the innermost substitution
	parens int     // unquoted ( open in the innermost substitution
}

type frame struct {
	double bool
	parens int
}

// expanded returns the parts of line the shell expands: outside single
// quotes and comments, with \$ removed (blanked, so that positions hold).
func (q *quoting) expanded(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q.single:
			if c == '\'' {
				q.single = false
			}
			b.WriteByte(' ')
			continue
		case c == '\\' && i+1 < len(line):
			i++
			b.WriteString("  ")
			continue
		case c == '"':
			q.double = !q.double
		case c == '\'' && !q.double:
			q.single = true
			b.WriteByte(' ')
			continue
		case c == '#' && !q.double && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return b.String()
		case c == '(' && i > 0 && line[i-1] == '$':
			q.frames = append(q.frames, frame{q.double, q.parens})
			q.double, q.parens = false, 0
		case c == '(' && !q.double:
			q.parens++
		case c == ')' && !q.double && q.parens > 0:
			q.parens--
		case c == ')' && !q.double && len(q.frames) > 0:
			f := q.frames[len(q.frames)-1]
			q.frames = q.frames[:len(q.frames)-1]
			q.double, q.parens = f.double, f.parens
		}
		b.WriteByte(c)
	}
	return b.String()
}
