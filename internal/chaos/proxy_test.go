package chaos

import (
	"errors"
	"io"
	"net"
	"sync"
)

// cutProxy stands between one worker and the Temporal frontend: a TCP
// proxy whose link can be cut (every connection through it closed, new
// ones closed as they come) and restored. A worker cut off so keeps
// running — its calls in flight go on, their writes reach the far side —
// while Temporal no longer hears from it: a zombie, as a network
// partition makes one. The kernel here has no netem, so the cut is made
// where the suite can reach it.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// newCutProxy listens on a free loopback port and forwards to target.
func newCutProxy(target string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the address workers dial instead of the frontend's.
func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go p.forward(c)
	}
}

// forward pipes one connection to the target both ways, unless the link
// is cut.
func (p *cutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	p.untrack(c, up)
}

// track notes a connection pair; false when the link is cut.
func (p *cutProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cutProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// Cut closes every connection through the proxy and refuses new ones
// until Restore.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops the proxy.
func (p *cutProxy) Close() error {
	p.Cut()
	return p.ln.Close()
}
