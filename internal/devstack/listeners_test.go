package devstack

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListening: a process's listening sockets are read from /proc, on
// IPv4 and IPv6, and a connected or closed socket is none of them.
func TestListening(t *testing.T) {
	v4, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer v4.Close()
	addrs := []string{v4.Addr().String()}
	if v6, err := net.Listen("tcp", "[::1]:0"); err == nil { // where the machine has IPv6
		defer v6.Close()
		addrs = append(addrs, v6.Addr().String())
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	conn, err := net.Dial("tcp", v4.Addr().String())
	require.NoError(t, err)
	defer conn.Close()

	got, err := listening(os.Getpid())
	require.NoError(t, err)
	require.Subset(t, got, addrs)
	require.NotContains(t, got, closed.Addr().String())
	require.NotContains(t, got, conn.LocalAddr().String(), "a connection is no listener")
}

func TestProcAddr(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0100007F:1F90", "127.0.0.1:8080"},
		{"00000000:1C21", "0.0.0.0:7201"},
		{"00000000000000000000000001000000:0050", "[::1]:80"},
		{"0000000000000000FFFF00000100007F:0050", "127.0.0.1:80"},
		{"00000000000000000000000000000000:0016", "[::]:22"},
	} {
		got, err := procAddr(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	for _, bad := range []string{"", "0100007F", "0100007F:XYZ", "01007F:0050", "zz00007F:0050"} {
		_, err := procAddr(bad)
		require.Error(t, err, bad)
	}
}
