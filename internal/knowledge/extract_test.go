package knowledge

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestExtract: text and Markdown are read as they are; HTML as its
// visible text with its headings as Markdown's; anything else, bytes
// that are not UTF-8 text and an empty text are refused saying which.
func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, in, want, err string
	}{
		{name: "text", contentType: "", in: "Hello.", want: "Hello."},
		{name: "markdown", contentType: "text/markdown; charset=utf-8", in: "# T\n\nBody.", want: "# T\n\nBody."},
		{name: "html", contentType: "text/html",
			in:   "<html><head><title>x</title><style>p{}</style></head><body><h1>Town</h1><p>It  lies\n on a <b>lake</b>.</p><script>evil()</script><ul><li>one</li><li>two</li></ul></body></html>",
			want: "# Town\n\nIt lies on a lake.\n\none\n\ntwo"},
		{name: "pdf without pages", contentType: "application/pdf", in: "%PDF-1.7", err: "the PDF does not parse"},
		{name: "unknown type", contentType: "application/zip", in: "PK", err: "content type application/zip"},
		{name: "malformed type", contentType: "text/", in: "x", err: "malformed"},
		{name: "not utf-8", contentType: "text/plain", in: "\xff\xfe", err: "not UTF-8"},
		{name: "nul", contentType: "text/plain", in: "a\x00b", err: "not UTF-8"},
		{name: "blank", contentType: "text/plain", in: " \n\t", err: "no text"},
		{name: "html without text", contentType: "text/html", in: "<script>x()</script>", err: "no text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Extract(tc.contentType, []byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.True(t, agent.IsCode(err, agent.CodeInvalid))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// FuzzExtract: Extract never panics, and what it answers is non-empty
// valid UTF-8 that Split can cut.
func FuzzExtract(f *testing.F) {
	f.Add("text/html", []byte("<h1>a</h1><p>b</p>"))
	f.Add("text/markdown", []byte("# a\n\nb"))
	f.Add("text/plain", []byte("plain"))
	pdf := testPDF(f, "", "A page of text.", "Another.")
	f.Add("application/pdf", pdf)
	f.Add("application/pdf", pdf[:len(pdf)*2/3])
	f.Add("text/html; charset=utf-8", []byte("<table><tr><td>x</td></tr></table><template>y</template>"))
	f.Fuzz(func(t *testing.T, contentType string, data []byte) {
		text, err := Extract(contentType, data)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.NotEmpty(t, text)
		require.True(t, utf8.ValidString(text))
		for _, p := range Split(text, SplitOptions{}) {
			require.NotEmpty(t, p.Text)
		}
	})
}
