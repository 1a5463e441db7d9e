package docs

import (
	"embed"
	"fmt"
	"strings"
)

// pages are the documentation's Markdown pages, by their path in this
// folder ("guides/a2a.md").
//
//go:embed *.md concepts reference guides operations
var pages embed.FS

// Page returns the page at name, a path in this folder ("guides/a2a.md").
func Page(name string) (string, error) {
	data, err := pages.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("docs page %s: %w", name, err)
	}
	return string(data), nil
}

// Section returns what the page at name says under the heading whose
// text is title, at any level: the lines after the heading up to the next
// heading of the same level or a higher one. Lines in fenced blocks are
// never headings.
func Section(name, title string) (string, error) {
	page, err := Page(name)
	if err != nil {
		return "", err
	}
	section, ok := sectionOf(page, title)
	if !ok {
		return "", fmt.Errorf("docs page %s has no heading %q", name, title)
	}
	return section, nil
}

// sectionOf is what text says under the heading title, as Section reads a
// page.
func sectionOf(text, title string) (string, bool) {
	lines := strings.SplitAfter(text, "\n")
	start, level := -1, 0
	for _, h := range headings(lines) {
		switch {
		case start < 0 && h.text == title:
			start, level = h.line, h.level
		case start >= 0 && h.level <= level:
			return strings.Join(lines[start+1:h.line], ""), true
		}
	}
	if start < 0 {
		return "", false
	}
	return strings.Join(lines[start+1:], ""), true
}

// Blocks returns the contents of the fenced blocks of markdown whose info
// string is lang ("sh", "yaml"), in order.
func Blocks(markdown, lang string) []string {
	var blocks []string
	var block strings.Builder
	in, keep := false, false
	for _, line := range strings.SplitAfter(markdown, "\n") {
		fence, info := isFence(line)
		switch {
		case !in && fence:
			in, keep = true, info == lang
			block.Reset()
		case in && fence && info == "":
			in = false
			if keep {
				blocks = append(blocks, block.String())
			}
		case in && keep:
			block.WriteString(line)
		}
	}
	return blocks
}

// heading is a Markdown ATX heading: its line, its level and its text.
type heading struct {
	line  int
	level int
	text  string
}

// headings returns the headings of lines in order, outside fenced blocks.
func headings(lines []string) []heading {
	var out []heading
	in := false
	for i, line := range lines {
		if fence, _ := isFence(line); fence {
			in = !in
			continue
		}
		if h, ok := parseHeading(line); ok && !in {
			h.line = i
			out = append(out, h)
		}
	}
	return out
}

func parseHeading(line string) (heading, bool) {
	line = strings.TrimRight(line, "\n")
	level := len(line) - len(strings.TrimLeft(line, "#"))
	if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
		return heading{}, false
	}
	return heading{level: level, text: strings.TrimSpace(line[level:])}, true
}

// isFence says whether line opens or closes a fenced block, and the info
// string after its backticks.
func isFence(line string) (bool, string) {
	line = strings.TrimRight(line, "\n")
	if !strings.HasPrefix(line, "```") {
		return false, ""
	}
	return true, strings.TrimSpace(strings.TrimLeft(line, "`"))
}
