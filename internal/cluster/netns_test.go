package cluster

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary serve as a process on a host: run with
// CLUSTER_ECHO=<addr>, it echoes lines on addr.
func TestMain(m *testing.M) {
	if addr := os.Getenv("CLUSTER_ECHO"); addr != "" {
		echo(addr)
		return
	}
	os.Exit(m.Run())
}

func echo(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(2)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			s := bufio.NewScanner(c)
			for s.Scan() {
				_, _ = c.Write([]byte(s.Text() + "\n"))
			}
		}()
	}
}

// TestPartition: a process on one host is reached from another host; with
// the first host's link cut it is not, and once healed it is again, the
// process having run on throughout.
func TestPartition(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err) // where the machine cannot make namespaces; CI runs as root
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := NewNetwork(ctx, "aftest", netip.MustParsePrefix("10.213.7.0/24"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	a, err := n.AddHost(ctx, "a")
	require.NoError(t, err)
	b, err := n.AddHost(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, "10.213.7.2", a.Addr.String())

	self, err := os.Executable()
	require.NoError(t, err)
	addr := net.JoinHostPort(a.Addr.String(), "7001")
	srv := a.Command(ctx, self)
	srv.Env = append(os.Environ(), "CLUSTER_ECHO="+addr)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	// ask runs nc-like: the test binary has no client mode, so a shell on
	// b opens the connection with bash's /dev/tcp.
	ask := func() (string, error) {
		out, err := b.Command(ctx, "timeout", "2", "bash", "-c",
			`exec 3<>/dev/tcp/`+a.Addr.String()+`/7001; echo hello >&3; head -1 <&3`).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	require.Eventually(t, func() bool { got, err := ask(); return err == nil && got == "hello" }, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, a.Cut(ctx))
	_, err = ask()
	require.Error(t, err, "a cut host is not reached")
	require.NoError(t, a.Heal(ctx))
	require.Eventually(t, func() bool { got, err := ask(); return err == nil && got == "hello" }, 10*time.Second, 100*time.Millisecond,
		"healed, the same process answers again")
	require.Nil(t, srv.ProcessState, "the process ran on through the partition")
}

// TestClaimSerial: with EnvSerial set, a second network is made only
// once the first is gone.
func TestClaimSerial(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	t.Setenv(EnvSerial, "1")
	ctx := context.Background()
	first, err := Claim(ctx)
	require.NoError(t, err)
	var closed atomic.Bool
	got := make(chan bool)
	go func() {
		second, err := Claim(ctx)
		if err == nil {
			defer second.Close()
		}
		got <- err == nil && closed.Load()
	}()
	closed.Store(true)
	require.NoError(t, first.Close())
	require.True(t, <-got, "the second network came after the first was gone")
}
