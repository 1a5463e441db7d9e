package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/klippa-app/go-pdfium"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TypePDF is a PDF document: its text is read by PDFium, compiled to
// WebAssembly and run in the process by wazero (no cgo, no other
// process).
const TypePDF = "application/pdf"

// Limits of a PDF's reading. A document over one of them is refused
// (agent.CodeInvalid, saying which), so that a hostile PDF costs at most
// this much of a worker.
const (
	// MaxPDFBytes bounds a PDF's size; the text it yields is bounded
	// again by the store (DefaultMaxDocumentBytes).
	MaxPDFBytes = 32 << 20
	// MaxPDFPages bounds a PDF's pages.
	MaxPDFPages = 2000
	// PDFTimeout bounds the reading of one PDF, the wait for a reader
	// included: past it the reader is killed and the document refused.
	PDFTimeout = 60 * time.Second
	// pdfReaders is how many PDFs the process reads at once: each reader
	// is a PDFium instance with its own memory.
	pdfReaders = 2
	// pdfMemoryPages bounds a reader's memory, in WebAssembly pages of
	// 64 KiB: 512 MiB.
	pdfMemoryPages = 8192
)

// pdfPool is the process's PDFium runtime: compiled once, on the first
// PDF (a few seconds of the compiler's time, and the memory of the
// compiled module), never for a process that reads none. Each document
// gets a fresh instance, so that nothing one PDF did to PDFium's state is
// seen by the next.
var pdfPool = sync.OnceValues(func() (pdfium.Pool, error) {
	return webassembly.Init(webassembly.Config{
		MinIdle:  0,
		MaxIdle:  pdfReaders,
		MaxTotal: pdfReaders,
		// No directory is mounted: PDFium reads the bytes it is handed,
		// never the host's files.
		FSConfig:      wazero.NewFSConfig(),
		Stdout:        io.Discard,
		Stderr:        io.Discard,
		RuntimeConfig: pdfRuntimeConfig(),
	})
})

// pdfRuntimeConfig is wazero's configuration for PDFium: the WebAssembly
// features its build uses, a memory bound, calls that end when their
// instance is killed, and the compiled code cached in the user's cache
// directory (agentflow/pdfium), where there is one that can be written:
// compiling PDFium takes tens of seconds of a core, loading it from the
// cache about one.
func pdfRuntimeConfig() wazero.RuntimeConfig {
	rc := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithMemoryLimitPages(pdfMemoryPages).
		WithCloseOnContextDone(true)
	dir, err := os.UserCacheDir()
	if err != nil {
		return rc
	}
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(dir, contract.Product, "pdfium"))
	if err != nil {
		return rc
	}
	return rc.WithCompilationCache(cache)
}

// WarmPDF starts the PDF reader now, compiling PDFium into the user's
// cache directory where there is one, so that a process's first PDF
// loads the compiled code instead of waiting for the compiler: `starter
// warm` runs it once on a machine (an image's build, a test run's
// start), and a worker that reads PDFs later starts in about a second.
func WarmPDF() error {
	_, err := pdfPool()
	return err
}

// errPDFUnreadable is a PDF that PDFium does not open.
var errPDFUnreadable = agent.Errorf(agent.CodeInvalid, "the PDF does not parse (corrupt or truncated)")

// pdfText returns a PDF's text, its pages in order, separated by a blank
// line. A document that is not a PDF, is corrupt, is encrypted, has no
// text (a scan: there is no OCR), or exceeds a limit is agent.CodeInvalid,
// saying which.
func pdfText(data []byte) (string, error) {
	switch {
	case len(data) > MaxPDFBytes:
		return "", agent.Errorf(agent.CodeInvalid, "the PDF is %d bytes; the limit is %d", len(data), MaxPDFBytes)
	case !bytes.Contains(data[:min(len(data), 1024)], []byte("%PDF-")):
		// PDF readers look for the header in the first KiB.
		return "", agent.Errorf(agent.CodeInvalid, "the document is not a PDF (no %%PDF- header)")
	}
	pool, err := pdfPool()
	if err != nil {
		return "", fmt.Errorf("start the PDF reader: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), PDFTimeout)
	defer cancel()
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		return "", agent.Errorf(agent.CodeUnavailable, "no PDF reader was free within %s", PDFTimeout)
	}
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: errPDFUnreadable}
			}
			done <- r
		}()
		r.text, r.err = readPDF(inst, data)
	}()
	select {
	case r := <-done:
		_ = inst.Close()
		return r.text, r.err
	case <-ctx.Done():
		// Killing the instance closes its module, which ends the call in
		// flight; the goroutine then returns, and is waited for.
		_ = inst.Kill()
		<-done
		return "", agent.Errorf(agent.CodeInvalid, "the PDF took longer than %s to read", PDFTimeout)
	}
}

// readPDF reads a PDF's pages' text with one PDFium instance.
func readPDF(inst pdfium.Pdfium, data []byte) (string, error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		switch {
		case errors.Is(err, pdferrors.ErrPassword), errors.Is(err, pdferrors.ErrSecurity):
			return "", agent.Errorf(agent.CodeInvalid, "the PDF is encrypted: ingest reads unprotected PDFs")
		}
		return "", errPDFUnreadable
	}
	defer func() { _, _ = inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document}) }()
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return "", errPDFUnreadable
	}
	if count.PageCount > MaxPDFPages {
		return "", agent.Errorf(agent.CodeInvalid, "the PDF has %d pages; the limit is %d", count.PageCount, MaxPDFPages)
	}
	pages := make([]string, 0, count.PageCount)
	for i := range count.PageCount {
		page, err := inst.GetPageText(&requests.GetPageText{
			Page: requests.Page{ByIndex: &requests.PageByIndex{Document: doc.Document, Index: i}},
		})
		if err != nil {
			return "", agent.Errorf(agent.CodeInvalid, "the PDF's page %d does not parse", i+1)
		}
		if t := cleanPDFText(page.Text); t != "" {
			pages = append(pages, t)
		}
	}
	if len(pages) == 0 {
		return "", agent.Errorf(agent.CodeInvalid, "the PDF has no text (a scanned PDF needs OCR, which ingest does not do)")
	}
	return strings.Join(pages, "\n\n"), nil
}

// cleanPDFText turns a page's text as PDFium gives it (lines ended by
// CRLF, soft hyphens and other control characters among the letters)
// into plain lines.
func cleanPDFText(s string) string {
	s = strings.ToValidUTF8(s, "")
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.Map(func(r rune) rune {
			switch {
			case r == '\t':
				return ' '
			case unicode.IsControl(r), r == '\ufffe', r == '\uffff':
				return -1
			}
			return r
		}, l)
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
