package docs

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = "# Page\n\nintro\n\n## One\n\n```sh\n# not a heading\necho one\n```\n\n### One, deeper\n\n" +
	"```yaml\na: 1\n```\n\n## Two\n\n```sh\necho two\n```\n"

// TestSectionOf: a section runs to the next heading of its level or a
// higher one, past deeper ones and past lines in fenced blocks that look
// like headings.
func TestSectionOf(t *testing.T) {
	one, ok := sectionOf(sample, "One")
	require.True(t, ok)
	require.Equal(t, "\n```sh\n# not a heading\necho one\n```\n\n### One, deeper\n\n```yaml\na: 1\n```\n\n", one)
	require.Equal(t, []string{"# not a heading\necho one\n"}, Blocks(one, "sh"))
	require.Equal(t, []string{"a: 1\n"}, Blocks(one, "yaml"))

	page, ok := sectionOf(sample, "Page")
	require.True(t, ok)
	require.Equal(t, []string{"# not a heading\necho one\n", "echo two\n"}, Blocks(page, "sh"))

	_, ok = sectionOf(sample, "not a heading")
	require.False(t, ok, "a line in a fenced block is no heading")
	_, err := Section("README.md", "No such heading")
	require.ErrorContains(t, err, "no heading")
	_, err = Page("nowhere.md")
	require.Error(t, err)
}

// TestIndexListsEveryPage: docs/README.md links every page of docs/.
func TestIndexListsEveryPage(t *testing.T) {
	index, err := Page("README.md")
	require.NoError(t, err)
	linked := map[string]bool{}
	for _, target := range links(index) {
		file, _, _ := strings.Cut(target, "#")
		linked[file] = true
	}
	require.NoError(t, fs.WalkDir(pages, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "README.md" {
			require.True(t, linked[p], "docs/README.md links %s", p)
		}
		return err
	}))
}
