package knowledge

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func texts(ps []Piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Text
	}
	return out
}

func TestSplit(t *testing.T) {
	words := func(n int, w string) string { return strings.TrimSpace(strings.Repeat(w+" ", n)) }
	for _, tc := range []struct {
		name string
		text string
		opts SplitOptions
		want []Piece
	}{
		{"empty", "", SplitOptions{}, nil},
		{"blank", " \n\t\n ", SplitOptions{}, nil},
		{"short", "  One sentence.  ", SplitOptions{}, []Piece{{Text: "One sentence."}}},
		{
			// 8 tokens = 32 bytes a chunk; a paragraph break in its second half ends it.
			name: "paragraphs",
			text: "First paragraph is here.\n\nSecond one follows it.",
			opts: SplitOptions{ChunkTokens: 8, OverlapTokens: -1},
			want: []Piece{{Text: "First paragraph is here."}, {Text: "Second one follows it."}},
		},
		{
			name: "headings",
			text: "Intro text.\n# Refunds\nRefunds take 5 days.\n## Damaged items\nSend a photo.\n```\n# not a heading\n```\n",
			want: []Piece{
				{Text: "Intro text."},
				{Text: "# Refunds\nRefunds take 5 days.", Heading: "Refunds"},
				{Text: "## Damaged items\nSend a photo.\n```\n# not a heading\n```", Heading: "Damaged items"},
			},
		},
		{
			// 4 tokens = 16 bytes; 2 tokens of overlap: each chunk
			// repeats the last word of the one before, so 6 words
			// make 5 chunks of two.
			name: "overlap",
			text: words(6, "abcdef"),
			opts: SplitOptions{ChunkTokens: 4, OverlapTokens: 2},
			want: []Piece{{Text: "abcdef abcdef"}, {Text: "abcdef abcdef"}, {Text: "abcdef abcdef"}, {Text: "abcdef abcdef"}, {Text: "abcdef abcdef"}},
		},
		{
			// A word longer than a chunk is cut at a rune boundary: "é" is 2 bytes, 9 of them in 16-byte chunks.
			name: "runes",
			text: strings.Repeat("é", 9),
			opts: SplitOptions{ChunkTokens: 4, OverlapTokens: -1},
			want: []Piece{{Text: strings.Repeat("é", 8)}, {Text: "é"}},
		},
		{
			name: "rune straddles the limit",
			text: "abc" + strings.Repeat("€", 5), // € is 3 bytes: 16 bytes end inside the fifth rune
			opts: SplitOptions{ChunkTokens: 4, OverlapTokens: -1},
			want: []Piece{{Text: "abc" + strings.Repeat("€", 4)}, {Text: "€"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(tc.text, tc.opts)
			require.Equal(t, tc.want, got, "texts %q", texts(got))
		})
	}
}

func TestSplitSizes(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("x", i%13))
		b.WriteString(" ends here. ")
		if i%9 == 0 {
			b.WriteString("\n\n")
		}
	}
	text := b.String()
	for _, o := range []SplitOptions{{}, {ChunkTokens: 32, OverlapTokens: 8}, {ChunkTokens: 64, OverlapTokens: -1}} {
		ps := Split(text, o)
		o = o.withDefaults()
		require.Greater(t, len(ps), 1)
		for i, p := range ps {
			require.LessOrEqual(t, agent.EstimateTokens(p.Text), o.ChunkTokens, "piece %d", i)
			require.Contains(t, text, p.Text)
		}
		// Every sentence is in some piece whole: the overlap and the cuts
		// at sentence ends keep them together.
		for _, s := range strings.SplitAfter(text, "here. ") {
			s = strings.TrimSpace(s)
			if s == "" || len(s) > o.ChunkTokens*2 {
				continue
			}
			found := false
			for _, p := range ps {
				if strings.Contains(p.Text, s) {
					found = true
					break
				}
			}
			require.True(t, found || o.OverlapTokens == 0, "sentence %q in no piece", s)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("# T\n\nSome text. More text.\n\n## U\nend", 8, 2)
	f.Add(strings.Repeat("é€a ", 40), 4, 1)
	f.Add("```\n# x\n", 1, 0)
	f.Fuzz(func(t *testing.T, text string, size, overlap int) {
		size = 1 + abs(size)%64
		overlap = abs(overlap) % 64
		if overlap == 0 {
			overlap = -1
		}
		ps := Split(text, SplitOptions{ChunkTokens: size, OverlapTokens: overlap})
		var covered int
		for _, p := range ps {
			if p.Text == "" || strings.TrimSpace(p.Text) != p.Text {
				t.Fatalf("piece %q is empty or untrimmed", p.Text)
			}
			if agent.EstimateTokens(p.Text) > max(size, 1) {
				t.Fatalf("piece of %d bytes over %d tokens", len(p.Text), size)
			}
			if !strings.Contains(text, p.Text) {
				t.Fatalf("piece %q is not part of the text", p.Text)
			}
			if utf8.ValidString(text) && !utf8.ValidString(p.Text) {
				t.Fatalf("piece %q splits a rune", p.Text)
			}
			covered += len(p.Text)
		}
		if strings.TrimSpace(text) != "" && utf8.ValidString(text) && covered == 0 {
			t.Fatal("text with content split into nothing")
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestChunkContext(t *testing.T) {
	cases := []struct {
		name, title string
		piece       Piece
		want        string
	}{
		{"untitled, no heading", "", Piece{Text: "Plain text."}, ""},
		{"title shown by the heading line", "Barrowmere", Piece{Text: "# Barrowmere\n\nA town.", Heading: "Barrowmere"}, ""},
		{"a later section", "Barrowmere", Piece{Text: "## Customs\n\nLanterns in May.", Heading: "Customs"}, "Barrowmere"},
		{"a later piece of a section", "Barrowmere", Piece{Text: "Lanterns in May.", Heading: "Customs"}, "Barrowmere › Customs"},
		{"no title, a later piece", "", Piece{Text: "Lanterns in May.", Heading: "Customs"}, "Customs"},
		{"title's spaces folded", "  Quorvex\tX-7 ", Piece{Text: "Battery: 9 hours."}, "Quorvex X-7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, chunkContext(c.title, c.piece))
		})
	}
}
