package knowledge

import (
	"bytes"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Content types Extract reads, with TypePDF.
const (
	TypeText     = "text/plain"
	TypeMarkdown = "text/markdown"
	TypeHTML     = "text/html"
)

// Extract returns the text of a document's bytes of the given content
// type: text and Markdown as they are (Split reads Markdown's headings),
// HTML as its visible text, its headings as Markdown headings so that
// chunks carry them; PDF as its pages' text, each after a blank line
// (pdfText, within the PDF limits). Bytes that are not valid UTF-8 text,
// an empty text, a PDF that does not parse, and a type it cannot read
// are agent.CodeInvalid, saying which.
func Extract(contentType string, data []byte) (string, error) {
	mt := TypeText
	if contentType != "" {
		t, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return "", agent.Errorf(agent.CodeInvalid, "content type %q is malformed", clip(contentType))
		}
		mt = t
	}
	if mt == TypePDF {
		return pdfText(data)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", agent.Errorf(agent.CodeInvalid, "the document is not UTF-8 text (content type %s)", mt)
	}
	var text string
	switch mt {
	case TypeText, TypeMarkdown, "text/x-markdown", "application/json", "text/csv":
		text = string(data)
	case TypeHTML, "application/xhtml+xml":
		var err error
		if text, err = htmlText(data); err != nil {
			return "", err
		}
	default:
		return "", agent.Errorf(agent.CodeInvalid, "content type %s: ingest reads text/plain, text/markdown, text/html and application/pdf", clip(mt))
	}
	if strings.TrimSpace(text) == "" {
		return "", agent.Errorf(agent.CodeInvalid, "the document has no text")
	}
	return text, nil
}

// htmlText is an HTML document's visible text: blocks on lines of their
// own, headings as Markdown headings, no script, style or template.
func htmlText(data []byte) (string, error) {
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return "", agent.Errorf(agent.CodeInvalid, "the HTML does not parse")
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			// Whitespace is kept where it was, collapsed below: "on a
			// <b>lake</b>." reads "on a lake.".
			b.WriteString(strings.ReplaceAll(n.Data, "\n", " "))
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Head:
				return
			}
		}
		level := headingLevel(n)
		block := isBlock(n)
		if block || level > 0 {
			b.WriteString("\n\n")
		}
		if level > 0 {
			b.WriteString(strings.Repeat("#", level) + " ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if block || level > 0 {
			b.WriteString("\n\n")
		}
	}
	walk(doc)
	lines := strings.Split(b.String(), "\n")
	out := make([]string, 0, len(lines))
	blank := true
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	return strings.TrimSpace(strings.Join(out, "\n")), nil
}

func headingLevel(n *html.Node) int {
	if n.Type != html.ElementNode {
		return 0
	}
	switch n.DataAtom {
	case atom.H1:
		return 1
	case atom.H2:
		return 2
	case atom.H3:
		return 3
	case atom.H4:
		return 4
	case atom.H5:
		return 5
	case atom.H6:
		return 6
	}
	return 0
}

func isBlock(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch n.DataAtom {
	case atom.P, atom.Div, atom.Li, atom.Ul, atom.Ol, atom.Br, atom.Tr, atom.Table, atom.Section, atom.Article,
		atom.Blockquote, atom.Pre, atom.Header, atom.Footer, atom.Main, atom.Nav, atom.Aside, atom.Dd, atom.Dt, atom.Title:
		return true
	}
	return false
}

// clip cuts a value quoted in an error.
func clip(s string) string { return words.Clip(s, 80) }
