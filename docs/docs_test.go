package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linked are the Markdown files whose relative links TestLinks checks,
// from the repository's root: these, and every .md under the folders.
var (
	linkedFiles   = []string{"README.md", "BENCHMARKS.md", "catalog/README.md"}
	linkedFolders = []string{"docs", "deploy"}
)

// TestLinks: every relative link of the repository's Markdown names a file
// or folder that exists, and every #anchor a heading of the file it names
// (GitHub's rule: lower case, punctuation dropped, spaces to '-').
func TestLinks(t *testing.T) {
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
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name string) map[string]bool {
		if a, ok := anchors[name]; ok {
			return a
		}
		data, err := fs.ReadFile(root, name)
		require.NoError(t, err)
		anchors[name] = headingAnchors(string(data))
		return anchors[name]
	}
	checked := 0
	for _, name := range files {
		data, err := fs.ReadFile(root, name)
		require.NoError(t, err)
		for _, target := range links(string(data)) {
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // a URL
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := name
			if file != "" {
				dest = path.Join(path.Dir(name), file)
				if _, err := fs.Stat(root, dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", name, target)
					continue
				}
			}
			if anchor != "" {
				assert.True(t, strings.HasSuffix(dest, ".md"), "%s links to %s: an anchor in a file that is no page", name, target)
				assert.True(t, anchorsOf(dest)[anchor], "%s links to %s: %s has no heading #%s", name, target, dest, anchor)
			}
		}
	}
	require.Greater(t, checked, 100, "the links were found")
}

var (
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE = regexp.MustCompile("`[^`]*`")
)

// links returns the targets of the Markdown links of text, outside fenced
// blocks and code spans.
func links(text string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence, _ := isFence(line); fence {
			in = !in
			continue
		}
		if in {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of text: a
// repeated one gets -1, -2, … after the first.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headings(strings.SplitAfter(text, "\n")) {
		a := anchorOf(h.text)
		for n := 1; out[a]; n++ {
			a = anchorOf(h.text) + "-" + strconv.Itoa(n)
		}
		out[a] = true
	}
	return out
}

// anchorOf is GitHub's anchor for a heading's text.
func anchorOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchorOf(t *testing.T) {
	for text, want := range map[string]string{
		"The Vercel AI SDK (`useChat`)":                           "the-vercel-ai-sdk-usechat",
		"Knowledge in turns: `retrieve`, `prepare` and citations": "knowledge-in-turns-retrieve-prepare-and-citations",
		"The local stack's storage":                               "the-local-stacks-storage",
		"Composites: pipelines that become tools":                 "composites-pipelines-that-become-tools",
		"Process definitions and patch_workflow":                  "process-definitions-and-patch_workflow",
	} {
		require.Equal(t, want, anchorOf(text), text)
	}
}

// TestPackageMap: README.md's package map lists every package `go list
// ./...` prints, each once, and nothing else. Nothing is left out by rule:
// test helpers and benchmark commands are packages a reader meets too.
func TestPackageMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "../...").Output()
	require.NoError(t, err)
	const module = "github.com/agentflow/agentflow"
	var want []string
	for _, p := range strings.Fields(string(out)) {
		want = append(want, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section, ok := sectionOf(string(readme), "Packages")
	require.True(t, ok, "README.md has a Packages section")
	blocks := Blocks(section, "")
	require.Len(t, blocks, 1, "the package map is one block")
	var listed []string
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(blocks[0], "\n"), "\n") {
		if line == "" || line[0] == ' ' {
			continue // a description's next line
		}
		p := strings.TrimSuffix(strings.Fields(line)[0], "/")
		if p == "." {
			p = "" // the module's root package
		}
		require.False(t, seen[p], "%s is listed twice", p)
		require.Greater(t, len(strings.Fields(line)), 1, "%s has a line saying what it holds", p)
		seen[p] = true
		listed = append(listed, p)
	}
	require.ElementsMatch(t, want, listed, "README.md's package map and go list ./...")
}
