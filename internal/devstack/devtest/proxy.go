package devtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server, for tests of what its
// clients do when it fails: CutAfter cuts its answers short, Down takes
// it away and Up brings it back on the same address.
type Proxy struct {
	to       string
	addr     string
	cutAfter atomic.Int64
	mu       sync.Mutex
	ln       net.Listener // nil while down
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// StartProxy forwards a free port of 127.0.0.1 to the server at to
// (host:port) until the test ends.
func StartProxy(t testing.TB, to string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("devtest: proxy: %v", err)
	}
	p := &Proxy{to: to, addr: ln.Addr().String()}
	p.serve(ln)
	t.Cleanup(func() {
		p.Down()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// CutAfter closes each connection once n more bytes of answers have gone
// through it, mid-answer, as a dropped connection does; 0 cuts nothing.
func (p *Proxy) CutAfter(n int64) { p.cutAfter.Store(n) }

// Down ends every connection and refuses new ones.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.ln, p.conns = nil, nil
}

// Up takes connections again, on the same address.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("devtest: proxy: %v", err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln, p.conns = ln, map[net.Conn]bool{}
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(ln, c, up) {
				continue
			}
			p.wg.Go(func() {
				_, _ = io.Copy(up, c)
				_ = up.Close()
			})
			p.wg.Go(func() { p.answer(c, up) })
		}
	})
}

// answer copies the server's answers to the client, cutting them off as
// CutAfter says.
func (p *Proxy) answer(c, up net.Conn) {
	defer c.Close()
	buf := make([]byte, 8<<10)
	var sent int64
	for {
		n, err := up.Read(buf)
		if cut := p.cutAfter.Load(); cut > 0 {
			if sent+int64(n) > cut {
				_, _ = c.Write(buf[:cut-sent])
				_ = up.Close()
				return
			}
			sent += int64(n)
		}
		if _, werr := c.Write(buf[:n]); werr != nil || err != nil {
			return
		}
	}
}

// track keeps a connection's two ends to close at Down; false when the
// listener it came from is down already.
func (p *Proxy) track(ln net.Listener, conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}
