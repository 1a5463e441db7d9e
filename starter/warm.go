package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentflow/agentflow/internal/knowledge"
)

// warmCmd compiles PDFium into the user's cache directory
// (knowledge.WarmPDF): tens of seconds of a core once per machine, so
// that no worker's first PDF, and no test, pays them.
func warmCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("warm", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("warm takes no arguments, got %q", fs.Args())
	}
	start := time.Now()
	if err := knowledge.WarmPDF(); err != nil {
		return fmt.Errorf("warm the PDF reader: %w", err)
	}
	fmt.Fprintf(out, "PDF reader ready in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}
