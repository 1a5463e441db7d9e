package cluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer is the TCP proxy in front of the gateways, as a cloud's load
// balancer is: each new connection goes to the next backend that takes
// it, in turn, so a gateway that is down or cut off is passed over.
type Balancer struct {
	// Addr is where clients connect.
	Addr     string
	backends []string
	ln       net.Listener
	next     atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// newBalancer listens on addr (host:0 for a free port) for backends.
func newBalancer(addr string, backends []string) (*Balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &Balancer{Addr: ln.Addr().String(), backends: backends, ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

func (b *Balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.relay(c) }()
	}
}

// relay joins client to the first backend, from the next in turn, that
// answers within a second.
func (b *Balancer) relay(client net.Conn) {
	defer client.Close()
	start := b.next.Add(1)
	var up net.Conn
	for i := range len(b.backends) {
		c, err := net.DialTimeout("tcp", b.backends[(int(start)+i)%len(b.backends)], time.Second)
		if err == nil {
			up = c
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	if !b.track(client, up) {
		return
	}
	defer b.untrack(client, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
}

func (b *Balancer) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *Balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

// Close stops taking connections and closes those it carries.
func (b *Balancer) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
