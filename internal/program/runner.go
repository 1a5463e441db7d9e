package program

import (
	"context"
)

// Options configure a Runner. Zero fields take the defaults named on each.
type Options struct {
	// Memory is each program's budget in bytes, capped by the kernel on
	// its child process. It is the Runner's, not a program's: a warm child
	// keeps the cap it started with. Default DefaultMemory.
	Memory int64
	// Concurrency is the most programs that run at once; a Run beyond it
	// waits for a slot as long as its context allows. Default
	// DefaultConcurrency.
	Concurrency int
}

// Runner runs programs in child processes. It is safe for concurrent use.
type Runner struct {
	memory int64
}

// New returns a runner. It starts no process: the first runs do.
func New(o Options) *Runner {
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return &Runner{memory: o.Memory}
}

// Run runs the program from its start, answering its calls from
// in.Recorded, until it is Done or waits on calls that have no recorded
// result (Pending). The program's faults — a syntax or runtime error, a
// limit, a call that differs from its recording — are an *Error; any
// other error is the runner's (a child that could not start, the
// context's end) and says nothing about the program.
func (r *Runner) Run(ctx context.Context, in Input) (Outcome, error) {
	panic("not yet")
}

// Close ends the idle children; runs under way end theirs as they finish.
func (r *Runner) Close() error { return nil }
