package cluster

import (
	"context"
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
	p    *toxiproxy.Proxy
	mu   sync.Mutex
	cut  bool
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
	k := &Link{Name: name, Addr: p.Listen, p: p}
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
// second; 0 removes the limit.
func (k *Link) Bandwidth(kbps int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, dir := range []string{"upstream", "downstream"} {
		name := "bandwidth-" + dir
		_ = k.p.Toxics.RemoveToxic(context.Background(), name)
		if kbps > 0 {
			if err := k.addToxic(name, "bandwidth", dir, fmt.Sprintf(`{"rate":%d}`, kbps)); err != nil {
				return err
			}
		}
	}
	return nil
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
	return k.restart(k.p.Upstream)
}

// Repoint sends the link's new connections to upstream and closes its
// connections to the old one, as a floating address or a proxy in front
// of a failed-over database does.
func (k *Link) Repoint(upstream string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restart(upstream)
}

// Reset closes every connection of the link at once, with a reset.
func (k *Link) Reset() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restart(k.p.Upstream)
}

// restart stops the link (closing its connections) and starts it again
// on the same address, to upstream, without the cut; k.mu is held.
func (k *Link) restart(upstream string) error {
	for _, dir := range []string{"upstream", "downstream"} {
		_ = k.p.Toxics.RemoveToxic(context.Background(), "cut-"+dir)
	}
	if err := k.p.Update(&toxiproxy.Proxy{Listen: k.p.Listen, Upstream: upstream, Enabled: false}); err != nil {
		return fmt.Errorf("cluster: stop link %s: %w", k.Name, err)
	}
	if err := k.p.Update(&toxiproxy.Proxy{Listen: k.Addr, Upstream: upstream, Enabled: true}); err != nil {
		return fmt.Errorf("cluster: start link %s: %w", k.Name, err)
	}
	return nil
}

// Latency delays what the link carries, each way, by d milliseconds with
// jitter more or less; 0 removes it.
func (k *Link) Latency(ms, jitter int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, dir := range []string{"upstream", "downstream"} {
		name := "latency-" + dir
		_ = k.p.Toxics.RemoveToxic(context.Background(), name)
		if ms > 0 {
			if err := k.addToxic(name, "latency", dir, fmt.Sprintf(`{"latency":%d,"jitter":%d}`, ms, jitter)); err != nil {
				return err
			}
		}
	}
	return nil
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
