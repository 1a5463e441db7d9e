package jqproc

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/agentflow/agentflow/internal/childproc"
)

// Defaults of Options and Program.
const (
	DefaultMemory      = 256 << 20
	DefaultConcurrency = 4
	DefaultMaxDepth    = 512
)

// Options configure a Pool. Zero fields take the defaults named on each.
type Options struct {
	// Memory is each program's budget in bytes: how much more memory its
	// process may map than it had when it started (the budget holds the
	// program's input, what it builds and its outputs). Default 256 MiB.
	Memory int64
	// Concurrency is the most programs that run at once; a Run beyond it
	// waits for a slot, for as long as its context allows. With Memory it
	// bounds what jq may take of a host: Concurrency × Memory, plus each
	// child's own few MiB. Default 4.
	Concurrency int
}

// Program is one run of a jq query.
type Program struct {
	// Query is a jq query, compiled by the child with no options: it
	// cannot read the environment, files or further inputs.
	Query string
	// Input is the program's input: a JSON value as encoding/json decodes
	// it into an any (json.Number or float64 numbers), with int, int64,
	// *big.Int and []map[string]any accepted too.
	Input any
	// Timeout bounds the run from the moment a child has it; waiting for
	// a slot is bounded by the context only. 0: the context only.
	Timeout time.Duration
	// MaxDepth bounds how deeply the input and each output may nest arrays
	// and objects. Default 512.
	MaxDepth int
	// MaxBytes bounds the encoded size of all outputs together; 0: no
	// bound but each output's 1 GiB. The encoding is at most three times
	// a JSON size that counts strings without escapes and non-literal
	// numbers as 8 bytes, so a caller that bounds such a size by n gives
	// 3n here and checks its own measure of what it is given.
	MaxBytes int
}

// Errors of Run. A run's error is one of these, a *ProgramError, the
// context's error, or a failure to start or talk to a child.
var (
	// ErrMemory: the program went over its memory budget; its process was
	// discarded.
	ErrMemory = errors.New("the program went over its memory budget")
	// ErrTimeout: the program ran past Program.Timeout and was killed.
	ErrTimeout = errors.New("the program ran past its time limit")
	// ErrTooDeep: an output nests deeper than Program.MaxDepth.
	ErrTooDeep = errors.New("an output is nested too deep")
	// ErrTooLarge: the outputs are over Program.MaxBytes.
	ErrTooLarge = errors.New("the outputs are over the size limit")
	// ErrBusy wraps the context's error when it ended while the run waited
	// for a slot.
	ErrBusy = errors.New("no jq slot came free")
	// ErrCrashed: the program's process panicked (a bug in gojq that the
	// program hit).
	ErrCrashed = errors.New("the jq process crashed")
)

// ProgramError is the program's own error (error/1, a type error, a
// halt_error); Message is jq's text.
type ProgramError struct {
	Message string
}

func (e *ProgramError) Error() string { return e.Message }

// Pool runs jq programs in child processes, each under a memory budget,
// at most Concurrency at once, and keeps the children that end well for
// the next run. It is safe for concurrent use.
type Pool struct {
	memory int64
	procs  *childproc.Pool
}

// New returns a pool. It starts no process: the first runs do.
func New(o Options) *Pool {
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return &Pool{memory: o.Memory, procs: childproc.NewPool(o.Concurrency)}
}

// Memory is the per-program budget in bytes.
func (p *Pool) Memory() int64 { return p.memory }

// Run runs prog and yields its outputs as the child sends them: gojq's
// values (nil, bool, int, float64, *big.Int, json.Number, string, []any,
// map[string]any; NaN and ±Inf as they are). It ends after the last
// output, or after yielding one error (with a nil value). Breaking out of
// the loop early kills the child. Context cancellation and Timeout kill
// it too; the error is then the context's or ErrTimeout.
func (p *Pool) Run(ctx context.Context, prog Program) iter.Seq2[any, error] {
	return func(yield func(any, error) bool) {
		if err := p.run(ctx, prog, yield); err != nil {
			yield(nil, err)
		}
	}
}

func (p *Pool) run(ctx context.Context, prog Program, yield func(any, error) bool) error {
	if prog.MaxDepth <= 0 {
		prog.MaxDepth = DefaultMaxDepth
	}
	timeout := uint64(0)
	if prog.Timeout > 0 {
		timeout = uint64(max(prog.Timeout.Milliseconds(), 1))
	}
	payload, err := appendRequest(nil, request{query: prog.Query, input: prog.Input, timeout: timeout, maxDepth: prog.MaxDepth})
	if err != nil {
		return fmt.Errorf("encode the input: %w", err)
	}
	began := time.Now()
	release, err := p.procs.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%w in %v (this process runs %d jq programs at once): %w", ErrBusy, time.Since(began).Round(time.Millisecond), p.procs.Slots(), err)
	}
	defer release()
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if prog.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, prog.Timeout)
	}
	defer cancel()
	stop := context.AfterFunc(runCtx, c.kill)
	retire, err := c.run(payload, prog.MaxBytes, prog.MaxDepth, yield)
	killed := !stop()
	switch {
	case errors.Is(err, errStopped): // the consumer is gone: yield no more
		c.close()
		return nil
	case killed && err == nil: // the run ended as the kill came
		c.close()
		return nil
	case killed:
		c.close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrTimeout
	case errors.Is(err, errDied):
		return c.Reap("jq process", deathCause)
	case (err == nil || isRunError(err)) && !retire:
		p.procs.Put(c.Proc)
		return err
	}
	c.close()
	return err
}

// isRunError reports whether err ended a run with an error frame, after
// which the child is ready for the next.
func isRunError(err error) bool {
	var pe *ProgramError
	return errors.As(err, &pe) || errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTimeout)
}

// get returns an idle child that is still alive, or starts one.
func (p *Pool) get(ctx context.Context) (*proc, error) {
	c, err := p.procs.Get(ctx, func(ctx context.Context) (*childproc.Proc, error) {
		c, err := start(ctx, p.memory)
		if err != nil {
			return nil, err
		}
		return c.Proc, nil
	})
	if errors.Is(err, childproc.ErrClosed) {
		return nil, errors.New("jq pool is closed")
	}
	if err != nil {
		return nil, err
	}
	return wrap(c), nil
}

// Close ends the idle children, as childproc.Pool.Close does.
func (p *Pool) Close() error {
	p.procs.Close()
	return nil
}
