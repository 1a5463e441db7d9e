package cluster

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers each line with its name and the line, on loopback.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					_, _ = c.Write([]byte(name + ":" + s.Text() + "\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends line on c and reads the answer, waiting at most wait.
func ask(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	s, err := r.ReadString('\n')
	return strings.TrimSpace(s), err
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestLinks: a cut link drops what either end sends and keeps the
// connection open; healed, its old connections are closed and new ones
// carry; one way, only the server's answers are lost; repointed, new
// connections reach the other server; latency delays each way.
func TestLinks(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	links := newLinks(netip.MustParseAddr("127.0.0.1"))
	t.Cleanup(links.Close)
	k, err := links.Add("client", "server", a)
	require.NoError(t, err)
	require.Equal(t, []*Link{k}, links.Matching("client>", "server"))
	require.Same(t, k, links.Get("client", "server"))

	c, r := dial(t, k.Addr)
	got, err := ask(c, r, "hello", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "a:hello", got)

	require.NoError(t, k.Cut())
	_, err = ask(c, r, "lost", 500*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "a cut drops the data and leaves the connection open: %v", err)
	c2, r2 := dial(t, k.Addr)
	_, err = ask(c2, r2, "lost too", 500*time.Millisecond)
	require.ErrorAs(t, err, &ne, "a new connection hangs the same way")

	require.NoError(t, k.Heal())
	_, err = ask(c, r, "after", 5*time.Second)
	require.Error(t, err, "healed, a connection that lived through the cut is closed")
	c, r = dial(t, k.Addr)
	got, err = ask(c, r, "again", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "a:again", got)

	require.NoError(t, k.CutOneWay())
	_, err = ask(c, r, "one way", 500*time.Millisecond)
	require.ErrorAs(t, err, &ne, "the answer is lost")
	require.NoError(t, k.Heal())

	require.NoError(t, k.Repoint(b))
	c, r = dial(t, k.Addr)
	got, err = ask(c, r, "moved", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "b:moved", got)

	require.NoError(t, k.Latency(100, 0))
	begin := time.Now()
	got, err = ask(c, r, "slow", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "b:slow", got)
	require.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond, "100 ms each way")

	// A reset keeps the latency; taking it off closes the connections,
	// which carried it, and the link goes on.
	require.NoError(t, k.Reset())
	c, r = dial(t, k.Addr)
	begin = time.Now()
	_, err = ask(c, r, "still slow", 5*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond, "the latency outlives a reset")
	require.NoError(t, k.Latency(0, 0))
	_, err = ask(c, r, "gone", 5*time.Second)
	require.Error(t, err, "changing the latency closed the connection")
	require.NoError(t, k.Bandwidth(64))
	require.NoError(t, k.Bandwidth(0))
	c, r = dial(t, k.Addr)
	got, err = ask(c, r, "plain", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "b:plain", got)
}

// TestBalancer: connections go to the backends in turn, passing over one
// that does not answer.
func TestBalancer(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	ln.Close() // nothing listens there
	lb, err := newBalancer("127.0.0.1:0", []string{a, down, b})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lb.Close()) })
	seen := map[string]int{}
	for range 6 {
		c, r := dial(t, lb.Addr)
		got, err := ask(c, r, "x", 5*time.Second)
		require.NoError(t, err)
		seen[got]++
		c.Close()
	}
	require.Equal(t, map[string]int{"a:x": 2, "b:x": 4}, seen, "the dead backend's turns go to the next")
}
