package devstack

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Listener is a TCP address a server of a Stack listens on: one of the
// platform's own, which tools must never reach (AGENTFLOW_PLATFORM_ADDRS).
type Listener struct {
	// Addr is host:port.
	Addr string
	// What listens there: "the Temporal dev server's metrics".
	What string
}

// Listeners are the TCP addresses the servers this Stack started listen
// on. They are read from the running processes, so that none is missed:
// the dev server's history and matching services listen on free ports of
// their own choosing, which no setting names. Those the stack chose are
// named; the others are "an internal port of" their server. A server
// given by address (Options.DatabaseURL, Options.TemporalAddress,
// Options.ObjectStoreEndpoint) is not
// the stack's: its processes are configured with its address anyway.
func (s *Stack) Listeners() []Listener {
	var out []Listener
	for _, sv := range []*service{s.postgres, s.temporal, s.objects} {
		if sv != nil {
			out = append(out, sv.listeners()...)
		}
	}
	return out
}

// PlatformAddrs are the addresses of Listeners, for processes to close to
// tools (AGENTFLOW_PLATFORM_ADDRS) beside those they are configured with.
func (s *Stack) PlatformAddrs() []string {
	var out []string
	for _, l := range s.Listeners() {
		out = append(out, l.Addr)
	}
	return out
}

// listeners are what sv's process listens on: the addresses the stack
// named, and every other one the process holds, read from /proc. Without
// /proc (or once the process is gone) they are the named ones.
func (sv *service) listeners() []Listener {
	out := slices.Clone(sv.named)
	if sv.proc == nil || sv.proc.exitError() != nil {
		return out
	}
	addrs, err := listening(sv.proc.cmd.Process.Pid)
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if !slices.ContainsFunc(out, func(l Listener) bool { return l.Addr == a }) {
			out = append(out, Listener{Addr: a, What: "an internal port of the " + sv.name})
		}
	}
	return out
}

// listening returns the TCP addresses (host:port) process pid listens on:
// its sockets (/proc/PID/fd) that its network namespace's tables
// (/proc/PID/net/tcp, tcp6) show in the LISTEN state.
func listening(pid int) ([]string, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, fmt.Errorf("listening sockets of %d: %w", pid, err)
	}
	sockets := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			sockets[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		addrs, err := listeningIn(filepath.Join(dir, "net", table), sockets)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // no tcp6 without IPv6
			return nil, err
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// listenState is TCP_LISTEN in /proc/net/tcp's st column.
const listenState = "0A"

// listeningIn reads a /proc/net/tcp table: the local addresses of its
// listening sockets among sockets (inodes).
func listeningIn(path string, sockets map[string]bool) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != listenState || !sockets[fields[9]] {
			continue
		}
		addr, err := procAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, addr)
	}
	return out, sc.Err()
}

// procAddr reads a /proc/net/tcp address, "0100007F:1F90": the IP as the
// kernel holds it (32-bit words in this machine's byte order, which
// Linux's platforms all have little-endian), then the port, in hex.
func procAddr(s string) (string, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(portHex, 16, 16)
	if !ok || err != nil {
		return "", fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || len(raw) != 4 && len(raw) != 16 {
		return "", fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		slices.Reverse(raw[i : i+4])
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)).String(), nil
}
