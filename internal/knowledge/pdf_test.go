package knowledge

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-pdf/fpdf"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// testPDF writes a PDF of one page per text, each text a paragraph in
// Helvetica; protect, if not "", is its user password.
func testPDF(t testing.TB, protect string, pages ...string) []byte {
	t.Helper()
	pdf := fpdf.New("P", "mm", "A4", "")
	if protect != "" {
		pdf.SetProtection(fpdf.CnProtectPrint, protect, protect+"-owner")
	}
	pdf.SetFont("Helvetica", "", 12)
	for _, text := range pages {
		pdf.AddPage()
		pdf.MultiCell(0, 6, text, "", "L", false)
	}
	var b bytes.Buffer
	require.NoError(t, pdf.Output(&b))
	return b.Bytes()
}

// TestExtractPDF: a PDF's pages are read in order, a blank line between
// them, each page's lines as they are laid out.
func TestExtractPDF(t *testing.T) {
	data := testPDF(t, "",
		"The lighthouse at Kerrow Point was lit in 1871.\nIts keeper kept a log of every ship.",
		"The harbour froze in the winter of 1895.")
	got, err := Extract("application/pdf", data)
	require.NoError(t, err)
	require.Equal(t, "The lighthouse at Kerrow Point was lit in 1871.\nIts keeper kept a log of every ship.\n\n"+
		"The harbour froze in the winter of 1895.", got)

	// Split reads it like any text: the pages' sentences, in order.
	pieces := Split(got, SplitOptions{ChunkTokens: 16, OverlapTokens: 0})
	require.NotEmpty(t, pieces)
	require.Contains(t, pieces[0].Text, "Kerrow Point")
	require.Contains(t, pieces[len(pieces)-1].Text, "winter of 1895")
}

// TestExtractPDFBad: a PDF that is corrupt, truncated, encrypted, not a
// PDF at all, or has no text is refused (agent.CodeInvalid), saying
// which; nothing panics, and the reader is fine for the next PDF.
func TestExtractPDFBad(t *testing.T) {
	good := testPDF(t, "", "A page of text.")
	corrupt := bytes.Clone(good)
	for i := 200; i < len(corrupt)-200; i += 7 {
		corrupt[i] ^= 0x5a
	}
	for _, tc := range []struct {
		name string
		data []byte
		err  string
	}{
		{name: "corrupt", data: corrupt, err: "the PDF does not parse"},
		{name: "truncated", data: good[:len(good)/2], err: "the PDF does not parse"},
		{name: "header only", data: []byte("%PDF-1.7\n"), err: "the PDF does not parse"},
		{name: "not a pdf", data: []byte("<html>hello</html>"), err: "not a PDF"},
		{name: "empty", data: nil, err: "not a PDF"},
		{name: "encrypted", data: testPDF(t, "secret", "Hidden text."), err: "encrypted"},
		{name: "no text", data: testPDF(t, "", ""), err: "no text"},
		{name: "too large", data: append([]byte("%PDF-1.7\n"), make([]byte, MaxPDFBytes)...), err: "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Extract("application/pdf", tc.data)
			require.ErrorContains(t, err, tc.err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		})
	}
	got, err := Extract("application/pdf", good)
	require.NoError(t, err)
	require.Equal(t, "A page of text.", got)
}

// TestExtractPDFConcurrent: more PDFs at once than there are readers
// wait their turn and are all read.
func TestExtractPDFConcurrent(t *testing.T) {
	const n = 2*pdfReaders + 1
	errs := make(chan error, n)
	for i := range n {
		want := strings.Repeat("word ", i+1) + "end."
		data := testPDF(t, "", want)
		go func() {
			got, err := Extract("application/pdf", data)
			if err == nil && got != want {
				err = agent.Errorf(agent.CodeInternal, "read %q, want %q", got, want)
			}
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
}

// BenchmarkExtractPDF: one two-page PDF read, a fresh PDFium instance
// each time (the runtime compiled once, before the timer).
func BenchmarkExtractPDF(b *testing.B) {
	data := testPDF(b, "", "The first page.", "The second page.")
	_, err := pdfPool()
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Extract("application/pdf", data); err != nil {
			b.Fatal(err)
		}
	}
}
