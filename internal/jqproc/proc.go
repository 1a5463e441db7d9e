package jqproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"github.com/agentflow/agentflow/internal/childproc"
)

// proc is the parent's handle on one child process.
type proc struct {
	*childproc.Proc
	cmd *exec.Cmd
	w   *bufio.Writer
	r   *bufio.Reader
}

// start starts a child with the memory budget and waits until it says it
// is ready, or ctx ends.
func start(ctx context.Context, memory int64) (*proc, error) {
	p, err := childproc.Start(ctx, childproc.Config{Env: envBudget, Name: "agentflow-jq", Protocol: protocol, Memory: memory})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start a jq process: %w", err)
	}
	return wrap(p), nil
}

// wrap gives a child the jq protocol's methods.
func wrap(p *childproc.Proc) *proc {
	return &proc{Proc: p, cmd: p.Cmd, w: p.W, r: p.R}
}

func (c *proc) kill()  { c.Kill() }
func (c *proc) close() { c.Close() }

// errDied says the child's pipe broke: it died or was killed mid-run.
var errDied = errors.New("jq process died")

// errStopped says the consumer stopped reading outputs.
var errStopped = errors.New("outputs no longer wanted")

// run sends one request and yields the outputs as they come (see
// readResults).
func (c *proc) run(payload []byte, maxBytes, maxDepth int, yield func(any, error) bool) (retire bool, err error) {
	if err := writeFrame(c.w, frameRequest, payload); err != nil {
		return false, errDied
	}
	if err := c.w.Flush(); err != nil {
		return false, errDied
	}
	return readResults(c.r, maxBytes, maxDepth, yield)
}

// readResults reads one run's frames and yields its outputs. It returns
// whether the child retires after the run, and an error: errDied when the
// stream ended, errStopped when yield returned false, and otherwise the
// run's error. After a *ProgramError, ErrTooDeep or ErrTimeout (an error
// frame, then the done frame) the child is ready for the next run; after
// any other error it is out of step. maxBytes bounds the encoded size of
// all outputs (0: maxFrame each).
func readResults(r *bufio.Reader, maxBytes, maxDepth int, yield func(any, error) bool) (retire bool, err error) {
	left := maxBytes
	var runErr error
	for {
		limit := maxFrame
		if maxBytes > 0 {
			limit = max(maxControlFrame, left)
		}
		kind, p, err := readFrame(r, limit)
		switch {
		case errors.Is(err, errFrameTooLarge) && kind == frameValue:
			return false, ErrTooLarge
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return false, errDied
		case err != nil:
			return false, fmt.Errorf("read from the jq process: %w", err)
		}
		switch kind {
		case frameValue:
			if runErr != nil {
				return false, errors.New("jq process sent an output after an error")
			}
			if maxBytes > 0 {
				if len(p) > left {
					return false, ErrTooLarge
				}
				left -= len(p)
			}
			v, err := decodeValue(p, maxDepth)
			if err != nil {
				return false, fmt.Errorf("jq process sent an output that does not decode: %w", err)
			}
			if !yield(v, nil) {
				return false, errStopped
			}
		case frameError:
			if runErr != nil {
				return false, errors.New("jq process sent a second error")
			}
			runErr = runError(p)
		case frameDone:
			if len(p) != 1 {
				return false, fmt.Errorf("jq process sent a done frame of %d bytes", len(p))
			}
			return p[0]&flagRetire != 0, runErr
		default:
			return false, fmt.Errorf("jq process sent a %q frame mid-run", kind)
		}
	}
}

// maxFrame bounds an output when the caller sets no byte limit.
const maxFrame = 1 << 30

// runError turns an error frame's payload into the run's error.
func runError(p []byte) error {
	if len(p) == 0 {
		return errors.New("jq process sent an empty error frame")
	}
	msg := string(p[1:])
	switch p[0] {
	case errProgram:
		return &ProgramError{Message: msg}
	case errDepth:
		return fmt.Errorf("%w: %s", ErrTooDeep, msg)
	case errTimeout:
		return ErrTimeout
	}
	return fmt.Errorf("jq process sent an error of unknown kind %q: %s", p[0], msg)
}

// deathCause says why a child died mid-run, the parent not having killed
// it (childproc.Cause): gojq is pure Go with no unsafe code, so a crash
// that is not a panic is the runtime's, for want of memory.
func deathCause(code int, stderr string) error {
	return childproc.Cause(code, stderr, "jq process", ErrMemory, func(line string) error { return fmt.Errorf("%w: %s", ErrCrashed, line) })
}
