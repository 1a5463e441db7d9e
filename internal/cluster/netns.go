// Package cluster runs agentflow's parts as hosts on one machine: each
// part in a network namespace of its own, on a bridge, addressed like a
// machine, so that a trial can cut a host's link and heal it again, as a
// network partition would. It needs root (CI runs as root); Available
// says why not where it cannot run.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Network is a bridge and the hosts on it, each a network namespace
// joined to the bridge by a veth pair.
type Network struct {
	name   string
	prefix netip.Prefix
	mu     sync.Mutex
	hosts  []*Host
	next   netip.Addr
	lock   *os.File // held while the network is this process's (Claim)
	serial *os.File // the machine's cluster lock, when EnvSerial asks for it
	index  int      // Claim's number of the network, 0 for another
}

// Host is one network namespace on a Network.
type Host struct {
	Name string
	// Addr is the host's address on the network.
	Addr netip.Addr
	ns   string
	link string // the veth end on the bridge's side
}

// Available says whether this machine can make networks: root, and the
// ip command with network namespaces.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("cluster: network namespaces need root (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("cluster: the ip command (iproute2) is needed: %w", err)
	}
	return nil
}

// NewNetwork makes the bridge name (at most 11 characters: link names
// derive from it) with the gateway address, the prefix's first, on it.
func NewNetwork(ctx context.Context, name string, prefix netip.Prefix) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(name) > 11 {
		return nil, fmt.Errorf("cluster: network name %q is longer than 11 characters", name)
	}
	prefix = prefix.Masked()
	gw := prefix.Addr().Next()
	n := &Network{name: name, prefix: prefix, next: gw.Next()}
	err := run(ctx,
		[]string{"link", "add", name, "type", "bridge"},
		[]string{"addr", "add", netip.PrefixFrom(gw, prefix.Bits()).String(), "dev", name},
		[]string{"link", "set", name, "up"})
	if err != nil {
		_ = run(context.Background(), []string{"link", "del", name})
		return nil, err
	}
	return n, nil
}

// Claim makes a network of its own for this process: the first of 250
// whose lock file it can take (so that test packages running side by
// side do not share one), named afc<i> on 10.77.<i>.0/24, after removing
// what a process killed before its cleanup left of that network.
func Claim(ctx context.Context) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), "agentflow-cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	serial, err := takeSerial(dir)
	if err != nil {
		return nil, err
	}
	n, err := claim(ctx, dir)
	if err != nil {
		if serial != nil {
			serial.Close()
		}
		return nil, err
	}
	n.serial = serial
	return n, nil
}

// EnvSerial, set to 1, has a process wait for every other cluster on
// the machine to stop before it makes its own (Claim), holding the turn
// until it stops: `go tool task test` sets it, so that its packages'
// clusters (fifteen processes each) do not all run at once beside the
// rest of the suite on two cores.
const EnvSerial = "AGENTFLOW_CLUSTER_SERIAL"

// takeSerial waits for the machine's cluster lock when EnvSerial asks
// for it, and returns it held (nil when not asked).
func takeSerial(dir string) (*os.File, error) {
	if os.Getenv(EnvSerial) != "1" {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "serial.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: wait for the other clusters: %w", err)
	}
	return f, nil
}

// claim takes the first free network of the 250.
func claim(ctx context.Context, dir string) (*Network, error) {
	for i := 1; i <= 250; i++ {
		lock, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
			continue
		}
		name := "afc" + strconv.Itoa(i)
		removeStale(ctx, name)
		n, err := NewNetwork(ctx, name, netip.MustParsePrefix(fmt.Sprintf("10.77.%d.0/24", i)))
		if err != nil {
			lock.Close()
			return nil, err
		}
		n.lock, n.index = lock, i
		return n, nil
	}
	return nil, errors.New("cluster: all 250 networks are in use")
}

// removeStale removes the bridge name and the namespaces of its hosts.
func removeStale(ctx context.Context, name string) {
	_ = run(ctx, []string{"link", "del", name})
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+"-") {
			_ = run(ctx, []string{"netns", "del", e.Name()})
		}
	}
}

// Gateway is this machine's own address on the network, which every
// host reaches: where a trial's own servers listen.
func (n *Network) Gateway() netip.Addr { return n.prefix.Addr().Next() }

// AddHost makes a host on the network with the next free address.
func (n *Network) AddHost(ctx context.Context, name string) (*Host, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.prefix.Contains(n.next) {
		return nil, fmt.Errorf("cluster: network %s is full", n.name)
	}
	h := &Host{Name: name, Addr: n.next, ns: n.name + "-" + name, link: fmt.Sprintf("%s-%d", n.name, len(n.hosts))}
	peer := h.link + "p"
	err := run(ctx,
		[]string{"netns", "add", h.ns},
		[]string{"link", "add", h.link, "type", "veth", "peer", "name", peer},
		[]string{"link", "set", peer, "netns", h.ns},
		[]string{"link", "set", h.link, "master", n.name},
		[]string{"link", "set", h.link, "up"},
		[]string{"-n", h.ns, "addr", "add", netip.PrefixFrom(h.Addr, n.prefix.Bits()).String(), "dev", peer},
		[]string{"-n", h.ns, "link", "set", peer, "up"},
		[]string{"-n", h.ns, "link", "set", "lo", "up"},
		[]string{"-n", h.ns, "route", "add", "default", "via", n.prefix.Addr().Next().String()})
	if err != nil {
		_ = run(context.Background(), []string{"link", "del", h.link}, []string{"netns", "del", h.ns})
		return nil, fmt.Errorf("cluster: host %s: %w", name, err)
	}
	n.hosts = append(n.hosts, h)
	n.next = n.next.Next()
	return h, nil
}

// Command is name with args, to run on the host.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// Argv is the command line that runs argv on the host as cred (nil: as
// this process). The program enters the host's network namespace and
// then, when cred is set, drops to it, asking the kernel again to kill it
// when its parent dies: a credential change forgets the parent's request.
func (h *Host) Argv(argv []string, cred *syscall.Credential) []string {
	out := []string{"nsenter", "--net=/run/netns/" + h.ns, "--"}
	if cred != nil {
		out = append(out, "setpriv", "--reuid="+strconv.Itoa(int(cred.Uid)), "--regid="+strconv.Itoa(int(cred.Gid)),
			"--clear-groups", "--pdeathsig=KILL", "--")
	}
	return append(out, argv...)
}

// Cut takes the host's link down: it reaches nothing and nothing reaches
// it, while what runs on it goes on (a partition, not a crash).
func (h *Host) Cut(ctx context.Context) error {
	return run(ctx, []string{"link", "set", h.link, "down"})
}

// Heal brings the host's link back up.
func (h *Host) Heal(ctx context.Context) error {
	return run(ctx, []string{"link", "set", h.link, "up"})
}

// Close removes the hosts and the bridge; processes left on a host lose
// their network.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, h := range n.hosts {
		errs = append(errs, run(context.Background(), []string{"link", "del", h.link}, []string{"netns", "del", h.ns}))
	}
	n.hosts = nil
	errs = append(errs, run(context.Background(), []string{"link", "del", n.name}))
	for _, f := range []**os.File{&n.lock, &n.serial} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	return errors.Join(errs...)
}

// run runs ip with each argument list in turn, stopping at the first
// that fails.
func run(ctx context.Context, cmds ...[]string) error {
	for _, args := range cmds {
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
