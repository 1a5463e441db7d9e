package childproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says which child to start.
type Config struct {
	// Env is the variable whose package's init serves as the child (see
	// Serve); its value is Memory.
	Env string
	// Name is the child's argv[0], as ps shows it.
	Name string
	// Protocol is the hello the child must say.
	Protocol string
	// Memory is the child's budget in bytes.
	Memory int64
}

// Proc is the parent's handle on one child process.
type Proc struct {
	Cmd *exec.Cmd
	// W writes requests; R reads results.
	W *bufio.Writer
	R *bufio.Reader
	// Exited is closed once the process has been reaped.
	Exited <-chan struct{}

	in, out *os.File // the parent's ends of the pipes
	stderr  *headBuffer
	exited  chan struct{}
	state   *os.ProcessState
}

// Start starts a child and waits until it says hello, or ctx ends (then
// the error is the context's).
func Start(ctx context.Context, c Config) (*Proc, error) {
	path, err := self()
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	p := &Proc{in: reqW, out: resR, stderr: &headBuffer{max: 4 << 10}, exited: make(chan struct{})}
	p.Exited = p.exited
	p.Cmd = &exec.Cmd{
		Path: path,
		Args: []string{c.Name},
		// Nothing of the parent's environment: the child's work cannot
		// read it anyway, and a child has no use for secrets in its memory.
		Env:         []string{c.Env + "=" + strconv.FormatInt(c.Memory, 10), "GOTRACEBACK=none"},
		ExtraFiles:  []*os.File{reqR, resW},
		Stderr:      p.stderr,
		SysProcAttr: sysProcAttr(),
	}
	err = p.Cmd.Start()
	reqR.Close()
	resW.Close()
	if err != nil {
		reqW.Close()
		resR.Close()
		return nil, err
	}
	p.W = bufio.NewWriterSize(reqW, 64<<10)
	p.R = bufio.NewReaderSize(resR, 64<<10)
	go p.reap()
	stop := context.AfterFunc(ctx, p.Kill)
	kind, hello, err := ReadFrame(p.R, MaxControlFrame)
	if !stop() {
		p.Close()
		return nil, ctx.Err()
	}
	if err != nil || kind != FrameHello || string(hello) != c.Protocol {
		p.Close()
		why := FirstLine(p.Stderr())
		if why == "" && err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("it did not get ready: %s", why)
	}
	return p, nil
}

// reap waits for the process to end.
func (p *Proc) reap() {
	_ = p.Cmd.Wait() // its error is in the state
	p.state = p.Cmd.ProcessState
	close(p.exited)
}

// Alive reports whether the process is still running, as far as the
// parent has seen.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill ends the process at once. It may be called from any goroutine, and
// after the process ended.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
}

// Close ends the process and waits until it is reaped. Closing the
// request pipe alone would end an idle child, but a busy one would not
// read it.
func (p *Proc) Close() {
	p.Kill()
	<-p.exited
	p.in.Close()
	p.out.Close()
}

// ExitCode waits for the process to end and returns its exit status, -1
// when a signal ended it.
func (p *Proc) ExitCode() int {
	<-p.exited
	if p.state != nil && p.state.Exited() {
		return p.state.ExitCode()
	}
	return -1
}

// Stderr is the start of what the child wrote to stderr: a dying Go
// process writes its reason first and stack traces after.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Reap says why a child's pipe broke, the parent not having killed it,
// and closes it. A child closes its pipe only by exiting, so it is
// reaped at once; one that has not after a while is killed and reported
// as such, with name ("jq process") saying whose it is. Otherwise cause
// reads the child's exit status and stderr (see Cause).
func (p *Proc) Reap(name string, cause func(code int, stderr string) error) error {
	select {
	case <-p.Exited:
	case <-time.After(5 * time.Second):
		p.Close()
		return fmt.Errorf("%s closed its pipe but did not exit", name)
	}
	code, stderr := p.ExitCode(), p.Stderr()
	p.Close()
	return cause(code, stderr)
}

// Cause says why a child named name died mid-run, from its exit status
// (-1 when a signal ended it) and the start of its stderr: its own
// complaint (ExitSetup) as what it says, a clean exit as such, a panic
// as crashed makes it from the panic's line, and anything else as memory.
// The budget is the likely cause, and the usual one (MemorySign); for a
// child of pure Go, as jq's and code mode's are, a crash that is not a
// panic is the runtime's, for want of memory.
func Cause(code int, stderr, name string, memory error, crashed func(line string) error) error {
	switch {
	case code == ExitSetup:
		return fmt.Errorf("%s failed: %s", name, FirstLine(stderr))
	case code == 0:
		return fmt.Errorf("%s exited mid-run", name)
	case MemorySign(stderr):
		return memory
	}
	if line, ok := Panicked(stderr); ok {
		return crashed(line)
	}
	return memory
}

// MemorySign reports whether a dying child's stderr speaks of memory,
// also when a panic is how it showed (a slice too large to make). A child
// that dies of its cap usually says so: the kernel refuses a mapping and
// the Go runtime ends the process with "out of memory", or, when the
// refusal hits the runtime's own bookkeeping, crashes (a SIGSEGV in the
// collector was seen on Go 1.26; a race-enabled binary's ThreadSanitizer
// says "failed to allocate").
func MemorySign(stderr string) bool {
	for _, sign := range []string{"out of memory", "cannot allocate memory", "failed to allocate", "len out of range", "cap out of range", "stack exceeds"} {
		if strings.Contains(stderr, sign) {
			return true
		}
	}
	return false
}

// Panicked reports whether a dying child's stderr shows a Go panic, and
// its line.
func Panicked(stderr string) (line string, ok bool) {
	if !strings.HasPrefix(stderr, "panic: ") && !strings.Contains(stderr, "\npanic: ") {
		return "", false
	}
	return lineWith(stderr, "panic: "), true
}

// headBuffer keeps the first max bytes written to it and drops the rest.
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

// FirstLine is the first line of s, trimmed.
func FirstLine(s string) string {
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
	return FirstLine(s)
}
