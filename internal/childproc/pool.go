package childproc

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is Get's error once the pool is closed.
var ErrClosed = errors.New("the pool of child processes is closed")

// Pool bounds how many children work at once (its slots) and keeps the
// children that ended a run well for the next. Idle children never
// outnumber the slots: a run takes an idle child before it starts one, so
// the processes alive are at most the slots. It is safe for concurrent
// use.
type Pool struct {
	slots chan struct{}

	mu     sync.Mutex
	idle   []*Proc
	closed bool
}

// NewPool returns a pool of n slots. It starts no process.
func NewPool(n int) *Pool {
	return &Pool{slots: make(chan struct{}, n)}
}

// Slots is the most children that work at once.
func (p *Pool) Slots() int { return cap(p.slots) }

// Busy is how many slots are taken.
func (p *Pool) Busy() int { return len(p.slots) }

// Acquire takes a slot, waiting as long as ctx allows; its error is then
// the context's. A free slot is taken even when ctx has ended.
func (p *Pool) Acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-p.slots }
	select {
	case p.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case p.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Get returns an idle child that is still alive, or one that start
// starts.
func (p *Pool) Get(ctx context.Context, start func(context.Context) (*Proc, error)) (*Proc, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return start(ctx)
		}
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if c.Alive() {
			return c, nil
		}
		c.Close()
	}
}

// Put keeps a child for the next run, or ends it when the pool is closed
// or holds as many idle children as it has slots.
func (p *Pool) Put(c *Proc) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= cap(p.slots) {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// Idle is the children kept for the next run, the last kept last.
func (p *Pool) Idle() []*Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Proc(nil), p.idle...)
}

// Close ends the idle children; runs under way end theirs as they finish.
// A pool that lives as long as its process need not be closed: children
// exit when the parent's end of their pipe closes, and the kernel kills
// them when it dies.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}
