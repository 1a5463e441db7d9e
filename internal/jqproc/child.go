package jqproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/childproc"
	"github.com/itchyny/gojq"
)

// envBudget names the variable that makes a process a jq child; its value
// is the memory budget in bytes. Only Pool sets it, on the processes it
// starts.
const envBudget = "AGENTFLOW_JQ_CHILD_BUDGET"

// exitSetup is the child's exit status when it could not start serving
// or broke the protocol: its message on stderr starts with "jqproc: ".
const exitSetup = childproc.ExitSetup

// retireBytes: a child whose Go runtime holds more than this after a run
// exits instead of waiting for the next one (see flagRetire).
const retireBytes = 64 << 20

// backstop is how long past a request's timeout the child stops the
// program itself; the parent kills it at the timeout, so this matters
// only when the parent is gone.
const backstop = time.Second

// init turns this process into a jq child when the parent asked for one
// (see childproc.Serve). Doing it in init rather than in main is what
// lets every binary that links the package serve as its own jq child with
// no wiring in its main.
func init() {
	childproc.Serve(envBudget, "jqproc", protocol, serve)
}

// serve runs one request at a time until the parent closes the pipe.
func serve(r *bufio.Reader, w *bufio.Writer) error {
	codes := codeCache{}
	for {
		kind, p, err := readFrame(r, math.MaxUint32)
		if errors.Is(err, io.EOF) {
			return nil // the parent is done with this child
		}
		if err != nil {
			return err
		}
		if kind != frameRequest {
			return fmt.Errorf("got a %q frame, want a request", kind)
		}
		req, err := decodeRequest(p)
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		p = nil
		if err := runRequest(req, codes, w); err != nil {
			return err
		}
		retire := childproc.HeldBytes() > retireBytes
		var flags byte
		if retire {
			flags = flagRetire
		}
		if err := writeFrame(w, frameDone, []byte{flags}); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if retire {
			return nil
		}
	}
}

// runRequest runs one program and writes its outputs, then an error frame
// when it failed. Errors it returns are the pipe's. Outputs are buffered
// and reach the parent when the buffer fills or the run ends: the parent
// collects them all before it uses any, and a write per output would cost
// a system call each.
func runRequest(req request, codes codeCache, w *bufio.Writer) error {
	code, err := codes.compile(req.query)
	if err != nil {
		return writeError(w, errProgram, err.Error())
	}
	ctx := context.Background()
	if req.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.timeout)*time.Millisecond+backstop)
		defer cancel()
	}
	iter := code.RunWithContext(ctx, req.input)
	var buf []byte
	for {
		v, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, isErr := v.(error); isErr {
			var halt *gojq.HaltError
			switch {
			case errors.As(err, &halt) && halt.Value() == nil:
				return nil // halt: stop without an error
			case errors.Is(err, context.DeadlineExceeded):
				return writeError(w, errTimeout, err.Error())
			}
			return writeError(w, errProgram, err.Error())
		}
		buf, err = appendValue(buf[:0], v, req.maxDepth)
		if errors.Is(err, errTooDeep) {
			return writeError(w, errDepth, fmt.Sprintf("output is nested more than %d levels deep", req.maxDepth))
		}
		if err != nil {
			return fmt.Errorf("encode an output: %w", err)
		}
		if err := writeFrame(w, frameValue, buf); err != nil {
			return err
		}
	}
}

// codeCache keeps the compiled queries of a child's recent runs: a
// pipeline's shape repeats (retries, cached pipelines with new inputs),
// and compiling costs as much as a small run.
type codeCache map[string]*gojq.Code

// maxCodes bounds a codeCache; when full it starts over.
const maxCodes = 64

func (c codeCache) compile(query string) (*gojq.Code, error) {
	if code, ok := c[query]; ok {
		return code, nil
	}
	parsed, err := gojq.Parse(query)
	if err != nil {
		return nil, err
	}
	// No options: the program reads no environment, files or inputs.
	code, err := gojq.Compile(parsed)
	if err != nil {
		return nil, err
	}
	if len(c) >= maxCodes {
		clear(c)
	}
	c[query] = code
	return code, nil
}

// maxMessage bounds the message of an error frame: error("...") can carry
// any string a program builds.
const maxMessage = 4 << 10

func writeError(w *bufio.Writer, kind byte, msg string) error {
	if len(msg) > maxMessage {
		n := maxMessage
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n] + "…"
	}
	return writeFrame(w, frameError, append([]byte{kind}, msg...))
}
