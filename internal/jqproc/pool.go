package jqproc

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"
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
	slots  chan struct{}

	mu     sync.Mutex
	idle   []*proc
	closed bool
}

// New returns a pool. It starts no process: the first runs do.
func New(o Options) *Pool {
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return &Pool{memory: o.Memory, slots: make(chan struct{}, o.Concurrency)}
}

// Memory is the per-program budget in bytes.
func (p *Pool) Memory() int64 { return p.memory }

// Concurrency is the most programs that run at once.
func (p *Pool) Concurrency() int { return cap(p.slots) }

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
	release, err := p.acquire(ctx)
	if err != nil {
		return err
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
		return p.died(c)
	case (err == nil || isRunError(err)) && !retire:
		p.put(c)
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

// died reports why a child's pipe broke. A child closes its pipe only by
// exiting, so it is reaped at once; one that has not after a while is
// killed and reported as such.
func (p *Pool) died(c *proc) error {
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		c.close()
		return errors.New("jq process closed its pipe but did not exit")
	}
	err := c.failure()
	c.close()
	return err
}

// acquire takes a slot, waiting as long as ctx allows.
func (p *Pool) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-p.slots }
	select {
	case p.slots <- struct{}{}:
		return release, nil
	default:
	}
	began := time.Now()
	select {
	case p.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w in %v (this process runs %d jq programs at once): %w", ErrBusy, time.Since(began).Round(time.Millisecond), cap(p.slots), ctx.Err())
	}
}

// get returns an idle child that is still alive, or starts one.
func (p *Pool) get(ctx context.Context) (*proc, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("jq pool is closed")
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return start(ctx, p.memory)
		}
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if c.alive() {
			return c, nil
		}
		c.close()
	}
}

// put keeps a child for the next run. Idle children never outnumber the
// slots: a run takes an idle child before it starts one, so the processes
// alive are at most Concurrency.
func (p *Pool) put(c *proc) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= cap(p.slots) {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// Close ends the idle children; runs under way end theirs as they finish.
// A pool that lives as long as its process need not be closed: children
// exit when the parent's end of their pipe closes, and the kernel kills
// them when it dies.
func (p *Pool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	return nil
}
