package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
)

// SplitOptions size chunks.
type SplitOptions struct {
	// ChunkTokens is the most tokens (agent.EstimateTokens) a chunk
	// holds; default 256.
	ChunkTokens int
	// OverlapTokens is how much of the end of a chunk the next one of the
	// same section repeats, so that a sentence cut at a boundary is whole
	// in one of them; default 32, at most half of ChunkTokens.
	OverlapTokens int
}

// Defaults of SplitOptions.
const (
	DefaultChunkTokens   = 256
	DefaultOverlapTokens = 32
)

func (o SplitOptions) withDefaults() SplitOptions {
	o.ChunkTokens = agent.OrDefault(o.ChunkTokens, DefaultChunkTokens)
	if o.OverlapTokens < 0 {
		o.OverlapTokens = 0
	} else if o.OverlapTokens == 0 {
		o.OverlapTokens = DefaultOverlapTokens
	}
	o.OverlapTokens = min(o.OverlapTokens, o.ChunkTokens/2)
	return o
}

// Piece is one chunk of a text as Split cut it.
type Piece struct {
	Text string
	// Heading is the Markdown heading the piece lies under, "" before the
	// first.
	Heading string
}

// bytesPerToken is agent.EstimateTokens' rule: a chunk of at most
// 4·n bytes is at most n tokens.
const bytesPerToken = 4

// Split cuts text into pieces (see the package doc). Every piece is a
// non-empty substring of text, valid UTF-8 where text is, and at most
// o.ChunkTokens tokens.
func Split(text string, o SplitOptions) []Piece {
	o = o.withDefaults()
	var out []Piece
	for _, sec := range sections(text) {
		for _, t := range window(sec.text, o.ChunkTokens*bytesPerToken, o.OverlapTokens*bytesPerToken) {
			out = append(out, Piece{Text: t, Heading: sec.heading})
		}
	}
	return out
}

type section struct{ heading, text string }

// sections cuts a Markdown text at its ATX headings ("# Title" … "######
// Title"), outside fenced code blocks. Each section's text starts with its
// heading line.
func sections(text string) []section {
	var out []section
	cur := section{}
	start, fence := 0, false
	for pos := 0; pos < len(text); {
		end := strings.IndexByte(text[pos:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += pos + 1
		}
		line := strings.TrimRight(text[pos:end], "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = !fence
		case !fence && len(line)-len(trimmed) < 4:
			if h, ok := heading(trimmed); ok {
				if pos > start {
					cur.text = text[start:pos]
					out = append(out, cur)
				}
				cur, start = section{heading: h}, pos
			}
		}
		pos = end
	}
	if start < len(text) {
		cur.text = text[start:]
		out = append(out, cur)
	}
	return out
}

// heading returns the title of an ATX heading line.
func heading(line string) (string, bool) {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n < len(line) && line[n] != ' ' && line[n] != '\t' {
		return "", false
	}
	title := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#"))
	if title == "" || !utf8.ValidString(title) {
		return "", false
	}
	if len(title) > agent.MaxMetadataValue {
		title = title[:runeStart(title, agent.MaxMetadataValue)]
	}
	return title, true
}

// window cuts text into trimmed pieces of at most size bytes, each
// starting about overlap bytes before the end of the one before.
func window(text string, size, overlap int) []string {
	var out []string
	start := skipSpace(text, 0)
	for start < len(text) {
		end := len(text)
		if end-start > size {
			end = cut(text, start, start+size)
		}
		if t := strings.TrimSpace(text[start:end]); t != "" {
			out = append(out, t)
		}
		if end >= len(text) {
			break
		}
		next := skipSpace(text, end)
		if overlap > 0 {
			if o := wordStart(text, end-overlap, end); o > start {
				next = o
			}
		}
		start = next
	}
	return out
}

// cut returns where a piece starting at start should end, at most limit:
// after the last paragraph break, else the last sentence's end, else the
// last space, in the second half of the piece; else at limit, moved back
// to the start of a rune.
func cut(text string, start, limit int) int {
	piece := text[start:limit]
	half := len(piece) / 2
	for _, sep := range []string{"\n\n", ". ", "! ", "? ", ".\n", "\n", " ", "\t"} {
		if i := strings.LastIndex(piece, sep); i >= half && i > 0 {
			return start + i + len(sep)
		}
	}
	if e := runeStart(text, limit); e > start {
		return e
	}
	// A single rune wider than the piece: take it whole (size ≥ 4 bytes
	// makes this unreachable, as no rune is longer).
	_, w := utf8.DecodeRuneInString(text[start:])
	return start + w
}

// wordStart returns the start of the first word at or after from, before
// end; from if none (moved to a rune start).
func wordStart(text string, from, end int) int {
	from = runeStart(text, max(from, 0))
	for i := from; i < end; {
		r, w := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			if j := skipSpace(text, i); j < end {
				return j
			}
			break
		}
		i += w
	}
	return from
}

func skipSpace(text string, i int) int {
	for i < len(text) {
		r, w := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
	}
	return i
}

// runeStart moves i back to the start of the rune it falls in.
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
