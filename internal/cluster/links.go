package cluster

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Links are the fault proxies between named hosts (Toxiproxy, run in
// this process): a client reaches a server through its link, so that a
// trial can partition the two, slow the link down, reset its connections
// or point it at another server, without touching either end. They
// listen on the bridge's own address, which every host reaches.
type Links struct {
	srv *toxiproxy.ApiServer
	ip  netip.Addr

	mu     sync.Mutex
	byName map[string]*Link
}

// Link is one client's way to one server.
type Link struct {
	// Name is from>to, as the trials name it.
	Name string
	// Addr is where the client connects.
	Addr string
	srv  *toxiproxy.ApiServer
	mu   sync.Mutex
	p    *toxiproxy.Proxy
	cut  bool
	// latency, jitter (ms) and bandwidth (KB/s) are the link's lasting
	// faults, kept through a renew.
	latency, jitter, bandwidth int
}

func newLinks(ip netip.Addr) *Links {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	return &Links{srv: srv, ip: ip, byName: map[string]*Link{}}
}

// Add opens the link from host from to upstream (host:port), on a free
// port of the bridge's address.
func (l *Links) Add(from, to, upstream string) (*Link, error) {
	name := from + ">" + to
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byName[name]; ok {
		return nil, fmt.Errorf("cluster: link %s exists", name)
	}
	p := toxiproxy.NewProxy(l.srv, name, net.JoinHostPort(l.ip.String(), "0"), upstream)
	if err := l.srv.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("cluster: link %s: %w", name, err)
	}
	k := &Link{Name: name, Addr: p.Listen, p: p, srv: l.srv}
	l.byName[name] = k
	return k, nil
}

// Get is the link named from>to, nil when there is none.
func (l *Links) Get(from, to string) *Link {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byName[from+">"+to]
}

// Matching are the links whose names contain every part, in name order.
func (l *Links) Matching(parts ...string) []*Link {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Link
	for name, k := range l.byName {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(name, p)
		}
		if all {
			out = append(out, k)
		}
	}
	sortLinks(out)
	return out
}

// Close stops every link.
func (l *Links) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv.Collection.Clear()
	l.byName = map[string]*Link{}
}

// Cut partitions the two ends silently: the connections stay open and
// what either end sends is dropped, as on a network that lost the route,
// and new connections are taken and hang the same way. Neither end
// learns of it but by its own timeouts.
func (k *Link) Cut() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cut {
		return nil
	}
	for _, dir := range []string{"upstream", "downstream"} {
		if err := k.addToxic("cut-"+dir, "timeout", dir, `{"timeout":0}`); err != nil {
			return err
		}
	}
	k.cut = true
	return nil
}

// CutOneWay drops what the server sends the client, while what the
// client sends still arrives: its connections are half-open, the
// server's end live and the client's waiting for answers that never
// come. Heal ends it.
func (k *Link) CutOneWay() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cut {
		return nil
	}
	if err := k.addToxic("cut-downstream", "timeout", "downstream", `{"timeout":0}`); err != nil {
		return err
	}
	k.cut = true
	return nil
}

// Bandwidth limits what the link carries each way to kbps kilobytes a
// second; 0 removes the limit. Changing a limit closes the link's
// connections.
func (k *Link) Bandwidth(kbps int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bandwidth != 0 {
		k.bandwidth = kbps
		return k.renew(k.p.Upstream, k.cut)
	}
	k.bandwidth = kbps
	return k.lasting()
}

// Heal ends a cut. The connections that lived through it lost what was
// sent, so they are closed (as their ends' timeouts would have), and
// the link takes new ones.
func (k *Link) Heal() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.cut {
		return nil
	}
	k.cut = false
	return k.renew(k.p.Upstream, false)
}

// Repoint sends the link's new connections to upstream and closes its
// connections to the old one, as a floating address or a proxy in front
// of a failed-over database does. A cut ends with it.
func (k *Link) Repoint(upstream string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = false
	return k.renew(upstream, false)
}

// Reset closes every connection of the link at once. A cut ends with it;
// latency and bandwidth stay.
func (k *Link) Reset() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = false
	return k.renew(k.p.Upstream, false)
}

// renew replaces the link's proxy with a new one on the same address, to
// upstream, with the lasting faults and, when cut, the cut: the old one
// stops, closing its connections. A toxic is never taken off a proxy
// that carries connections (Toxiproxy can wait forever on a link blocked
// in one); a new proxy has none to wait on. k.mu is held.
func (k *Link) renew(upstream string, cut bool) error {
	_ = k.srv.Collection.Remove(k.Name)
	p := toxiproxy.NewProxy(k.srv, k.Name, k.Addr, upstream)
	k.p = p
	if err := k.lasting(); err != nil {
		return err
	}
	if cut {
		for _, dir := range []string{"upstream", "downstream"} {
			if err := k.addToxic("cut-"+dir, "timeout", dir, `{"timeout":0}`); err != nil {
				return err
			}
		}
	}
	if err := k.srv.Collection.Add(p, true); err != nil {
		return fmt.Errorf("cluster: restart link %s: %w", k.Name, err)
	}
	return nil
}

// lasting adds the latency and bandwidth toxics the link's settings call
// for and it lacks. k.mu is held.
func (k *Link) lasting() error {
	for _, dir := range []string{"upstream", "downstream"} {
		if k.latency > 0 && k.p.Toxics.GetToxic("latency-"+dir) == nil {
			if err := k.addToxic("latency-"+dir, "latency", dir, fmt.Sprintf(`{"latency":%d,"jitter":%d}`, k.latency, k.jitter)); err != nil {
				return err
			}
		}
		if k.bandwidth > 0 && k.p.Toxics.GetToxic("bandwidth-"+dir) == nil {
			if err := k.addToxic("bandwidth-"+dir, "bandwidth", dir, fmt.Sprintf(`{"rate":%d}`, k.bandwidth)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Latency delays what the link carries, each way, by ms milliseconds
// with jitter more or less; 0 removes it. Changing a delay closes the
// link's connections.
func (k *Link) Latency(ms, jitter int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.latency != 0 {
		k.latency, k.jitter = ms, jitter
		return k.renew(k.p.Upstream, k.cut)
	}
	k.latency, k.jitter = ms, jitter
	return k.lasting()
}

func (k *Link) addToxic(name, kind, stream, attrs string) error {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, kind, stream, attrs)
	if _, err := k.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return fmt.Errorf("cluster: link %s: %s: %w", k.Name, name, err)
	}
	return nil
}

func sortLinks(ls []*Link) {
	slices.SortFunc(ls, func(a, b *Link) int { return strings.Compare(a.Name, b.Name) })
}
