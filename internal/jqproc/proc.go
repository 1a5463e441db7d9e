package jqproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// proc is the parent's handle on one child process.
type proc struct {
	cmd    *exec.Cmd
	in     *os.File // the parent's end of the request pipe
	w      *bufio.Writer
	out    *os.File // the parent's end of the result pipe
	r      *bufio.Reader
	stderr *headBuffer
	// exited is closed once the process has been reaped; state is then set.
	exited chan struct{}
	state  *os.ProcessState
}

// start starts a child with the memory budget and waits until it says it
// is ready, or ctx ends.
func start(ctx context.Context, memory int64) (*proc, error) {
	path, err := self()
	if err != nil {
		return nil, fmt.Errorf("start a jq process: %w", err)
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start a jq process: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, fmt.Errorf("start a jq process: %w", err)
	}
	c := &proc{in: reqW, out: resR, stderr: &headBuffer{max: 4 << 10}, exited: make(chan struct{})}
	c.cmd = &exec.Cmd{
		Path: path,
		Args: []string{"agentflow-jq"},
		// Nothing of the parent's environment: the program cannot read it
		// anyway, and a child has no use for secrets in its memory.
		Env:         []string{envBudget + "=" + strconv.FormatInt(memory, 10), "GOTRACEBACK=none"},
		ExtraFiles:  []*os.File{reqR, resW},
		Stderr:      c.stderr,
		SysProcAttr: sysProcAttr(),
	}
	err = c.cmd.Start()
	reqR.Close()
	resW.Close()
	if err != nil {
		reqW.Close()
		resR.Close()
		return nil, fmt.Errorf("start a jq process: %w", err)
	}
	c.w = bufio.NewWriterSize(reqW, 64<<10)
	c.r = bufio.NewReaderSize(resR, 64<<10)
	go c.reap()
	stop := context.AfterFunc(ctx, c.kill)
	kind, p, err := readFrame(c.r, maxControlFrame)
	if !stop() {
		c.close()
		return nil, ctx.Err()
	}
	if err != nil || kind != frameHello || string(p) != protocol {
		c.close()
		why := firstLine(c.stderr.String())
		if why == "" && err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("start a jq process: it did not get ready: %s", why)
	}
	return c, nil
}

// reap waits for the process to end, then closes the pipes' read side.
func (c *proc) reap() {
	_ = c.cmd.Wait() // its error is in the state
	c.state = c.cmd.ProcessState
	close(c.exited)
}

// alive reports whether the process is still running, as far as the
// parent has seen.
func (c *proc) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// kill ends the process at once. It may be called from any goroutine, and
// after the process ended.
func (c *proc) kill() {
	_ = c.cmd.Process.Kill()
}

// close ends the process and waits until it is reaped. Closing the
// request pipe alone would end an idle child, but one that is running a
// program would not read it.
func (c *proc) close() {
	c.kill()
	<-c.exited
	c.in.Close()
	c.out.Close()
}

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

// failure says why a child died mid-run; the parent did not kill it.
func (c *proc) failure() error {
	<-c.exited
	code := -1
	if c.state != nil && c.state.Exited() {
		code = c.state.ExitCode()
	}
	return deathCause(code, c.stderr.String())
}

// deathCause says why a child died, from its exit status (-1 when a
// signal ended it) and the start of its stderr. The budget is the likely
// cause, and the usual one: the kernel refuses a mapping and the Go
// runtime ends the process, with "out of memory" on stderr or, when the
// refusal hits the runtime's own bookkeeping, a crash of its own (a
// SIGSEGV in the collector was seen on Go 1.26; a race-enabled binary's
// ThreadSanitizer says "failed to allocate"). gojq is pure Go with no
// unsafe code, so a crash that is not a panic is the runtime's. A panic
// is reported as such, and a child's own complaint (exitSetup) as what it
// says.
func deathCause(code int, stderr string) error {
	switch {
	case code == exitSetup:
		return fmt.Errorf("jq process failed: %s", firstLine(stderr))
	case code == 0:
		return errors.New("jq process exited mid-run")
	case memorySign(stderr):
		return ErrMemory
	case strings.HasPrefix(stderr, "panic: ") || strings.Contains(stderr, "\npanic: "):
		return fmt.Errorf("%w: %s", ErrCrashed, lineWith(stderr, "panic: "))
	}
	return ErrMemory
}

// memorySign reports whether a dying child's stderr speaks of memory,
// also when a panic is how it showed (a slice too large to make).
func memorySign(s string) bool {
	for _, sign := range []string{"out of memory", "cannot allocate memory", "failed to allocate", "len out of range", "cap out of range", "stack exceeds"} {
		if strings.Contains(s, sign) {
			return true
		}
	}
	return false
}

// headBuffer keeps the first max bytes written to it and drops the rest:
// a dying Go process writes its reason first and stack traces after.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.b.Len(); room > 0 {
		h.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return firstLine(s)
}
