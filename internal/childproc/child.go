package childproc

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
)

// The child's ends of the pipes: requests in, results out (cmd.ExtraFiles
// puts them at 3 and 4).
const (
	childIn  = 3
	childOut = 4
)

// ExitSetup is a child's exit status when it could not start serving or
// broke the protocol: its message on stderr says why.
const ExitSetup = 3

// FrameHello is the child's first frame: its payload is the protocol
// name, and it says the child is ready (its memory capped).
const FrameHello = 'h'

// Serve turns this process into a child when the variable env is set (to
// the memory budget in bytes), and never returns then; otherwise it
// returns at once. Call it from a package's init. A child caps its
// memory, says hello with the protocol name, then runs serve over the
// request and result pipes, and exits 0 when serve returns nil (the
// parent closed the pipe) or ExitSetup with "<name>: <error>" on stderr.
func Serve(env, name, protocol string, serve func(r *bufio.Reader, w *bufio.Writer) error) {
	v, ok := os.LookupEnv(env)
	if !ok {
		return
	}
	os.Exit(child(env, v, name, protocol, serve))
}

func child(env, budget, name, protocol string, serve func(r *bufio.Reader, w *bufio.Writer) error) int {
	n, err := strconv.ParseInt(budget, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "%s: %s=%q: want a positive number of bytes\n", name, env, budget)
		return ExitSetup
	}
	// The kernel's cap is what holds; the runtime's soft limit makes the
	// collector work harder as the work nears it, so that garbage is not
	// what runs it out of its budget.
	if err := capMemory(n); err != nil {
		fmt.Fprintf(os.Stderr, "%s: cap memory: %v\n", name, err)
		return ExitSetup
	}
	debug.SetMemoryLimit(n)
	in, out := os.NewFile(childIn, "requests"), os.NewFile(childOut, "results")
	if in == nil || out == nil {
		fmt.Fprintf(os.Stderr, "%s: file descriptors 3 and 4 are not open\n", name)
		return ExitSetup
	}
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	err = WriteFrame(w, FrameHello, []byte(protocol))
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = serve(r, w)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return ExitSetup
	}
	return 0
}

// HeldBytes is the memory the Go runtime holds from the OS: a child whose
// work left it large retires rather than wait, big, for the next.
func HeldBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
