package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// The environment variables that configure an Operator. The processes
// that run tools or apply catalogs read them at start (internal/server);
// messages name them so that a tenant admin knows whom to ask.
const (
	// EnvAllow opens addresses beyond the public internet: a
	// comma-separated list of CIDRs, IP literals (any port), IP:port and
	// host:port entries (ParseAllow).
	EnvAllow = "AGENTFLOW_EGRESS_ALLOW"
	// EnvPlatformAddrs names more of the platform's own listening
	// addresses, host:port, comma-separated (ParsePlatformAddrs).
	EnvPlatformAddrs = "AGENTFLOW_PLATFORM_ADDRS"
)

// Operator is the operator's egress policy: configuration of the
// process, not of a catalog, that every tenant's allowlist can only
// narrow. By default it opens the public internet and nothing of the
// ranges the dialer refuses (loopback, private, link-local, metadata and
// the other special-purpose addresses); entries of EnvAllow open more.
// The platform's own listening addresses stay closed whatever is opened.
//
// A nil *Operator is the default policy with no platform address known.
// Build one with NewOperator; it is safe for concurrent use.
type Operator struct {
	prefixes []netip.Prefix   // opened at every port; an IP literal as a single-address prefix
	addrs    []netip.AddrPort // opened IP:port entries
	names    []nameAt         // opened host:port names: their answers may be dialled
	platform platform
}

// nameAt is a host name and a port.
type nameAt struct {
	name string // lower case, no trailing dot
	port uint16
}

// platform is the platform's own listening addresses, each with what
// listens there.
type platform struct {
	addrs map[netip.AddrPort]string
	// local are ports closed on every address of this machine: those of
	// listeners on a loopback or unspecified host.
	local map[uint16]string
	// names are the host names the addresses were configured with.
	names map[nameAt]string
	// self are this machine's interface addresses, read at start when a
	// port is local.
	self []netip.Addr
}

// OperatorConfig is what NewOperator builds an Operator from.
type OperatorConfig struct {
	// Allow opens addresses of the refused ranges (EnvAllow; see
	// ParseAllow for the forms). A metadata address is opened only by an
	// exact entry. Default: none.
	Allow []string
	// Platform lists the platform's own listening addresses, closed to
	// tools whatever Allow opens and whatever a catalog says.
	Platform []PlatformAddr
	// Resolver looks up the host names of Platform, once. Default:
	// net.DefaultResolver.
	Resolver Resolver
}

// PlatformAddr is a listening address of the platform's own.
type PlatformAddr struct {
	// Addr is host:port. A loopback or unspecified host (127.0.0.1,
	// 0.0.0.0, ::, localhost, or none as in ":9090") closes the port on
	// every address of this machine; a host name is resolved by
	// NewOperator and its addresses at the port are closed, and so is the
	// name at the port.
	Addr string
	// What listens there, as refusals name it: "the Temporal frontend's
	// HTTP API".
	What string
	// From is the setting Addr comes from, for errors at start:
	// "TEMPORAL_ADDRESS".
	From string
}

// NewOperator checks cfg and builds the operator's policy, resolving the
// host names of cfg.Platform. An Allow entry may not name a platform
// address.
func NewOperator(ctx context.Context, cfg OperatorConfig) (*Operator, error) {
	o := &Operator{platform: platform{addrs: map[netip.AddrPort]string{}, local: map[uint16]string{}, names: map[nameAt]string{}}}
	for _, s := range cfg.Allow {
		if err := o.allow(s); err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvAllow, s, err)
		}
	}
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	for _, pa := range cfg.Platform {
		if err := o.platform.add(ctx, resolver, pa); err != nil {
			return nil, fmt.Errorf("%s: platform address %q (%s): %w", pa.From, pa.Addr, pa.What, err)
		}
	}
	if len(o.platform.local) > 0 {
		self, err := interfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("list this machine's addresses: %w", err)
		}
		o.platform.self = self
	}
	for _, ap := range o.addrs {
		if what, ok := o.platformAt("", ap.Addr(), ap.Port()); ok {
			return nil, fmt.Errorf("%s entry %q: %s is %s, a port of the platform's own, which stays closed", EnvAllow, ap, ap, what)
		}
	}
	for _, n := range o.names {
		if what, ok := o.platformAt(n.name, netip.Addr{}, n.port); ok {
			return nil, fmt.Errorf("%s entry \"%s:%d\": port %d of %s is %s, a port of the platform's own, which stays closed", EnvAllow, n.name, n.port, n.port, n.name, what)
		}
	}
	return o, nil
}

// OpenOperator is an Operator that opens entries (as EnvAllow does) and
// knows no platform address: for programs and tests whose tools call
// servers of their own on this machine.
func OpenOperator(entries ...string) (*Operator, error) {
	return NewOperator(context.Background(), OperatorConfig{Allow: entries})
}

// ParseAllow reads EnvAllow's value: comma-separated entries, spaces
// around them ignored, each one of
//
//	10.0.0.0/8, fd12::/16      a CIDR prefix: its addresses at every port
//	10.1.2.3, ::1, [::1]       an IP literal: that address at every port
//	10.1.2.3:8089, [::1]:8089  that address at that port
//	flights.internal:8089      a host name at that port: tenants that list
//	                           the name may dial whatever it resolves to
//
// A metadata address is opened only by an exact entry (an IP literal, a
// /32 or /128 prefix, or IP:port), never by a wider CIDR.
func ParseAllow(value string) ([]string, error) {
	entries := words.ListEntries(value)
	var o Operator
	for _, e := range entries {
		if err := o.allow(e); err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvAllow, e, err)
		}
	}
	return entries, nil
}

// ParsePlatformAddrs reads EnvPlatformAddrs's value: comma-separated
// host:port addresses, spaces around them ignored (see PlatformAddr.Addr).
func ParsePlatformAddrs(value string) ([]string, error) {
	entries := words.ListEntries(value)
	for _, e := range entries {
		if _, _, err := splitPlatformAddr(e); err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvPlatformAddrs, e, err)
		}
	}
	return entries, nil
}

// allow adds one EnvAllow entry.
func (o *Operator) allow(s string) error {
	pfx, h, err := parseEntry(s)
	switch {
	case err != nil:
		return err
	case pfx.IsValid() && pfx.Addr().Is6() && nat64.Bits() <= pfx.Bits() && nat64.Contains(pfx.Addr()):
		return errors.New("write the IPv4 addresses a NAT64 prefix stands for")
	case pfx.IsValid():
		o.prefixes = append(o.prefixes, pfx)
	case h.wildcard:
		return errors.New("a wildcard is not allowed here: name each host with its port")
	case h.addr.IsValid() && nat64.Contains(h.addr):
		return errors.New("write the IPv4 address a NAT64 address stands for")
	case h.addr.IsValid() && h.port == 0:
		o.prefixes = append(o.prefixes, netip.PrefixFrom(h.addr, h.addr.BitLen()))
	case h.addr.IsValid():
		o.addrs = append(o.addrs, netip.AddrPortFrom(h.addr, h.port))
	case h.port == 0:
		return fmt.Errorf("name the port too, as in %s:443", h.name)
	default:
		o.names = append(o.names, nameAt{name: h.name, port: h.port})
	}
	return nil
}

// splitPlatformAddr reads a platform address: host (lower case, no
// brackets or trailing dot; "" for none) and port.
func splitPlatformAddr(s string) (string, uint16, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("port %q is not in 1..65535", portText)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", uint16(n), nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", 0, errors.New("an IPv6 zone is not allowed")
		}
		return host, uint16(n), nil
	}
	if err := checkName(host); err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}

// lookupTimeout bounds the lookup of a platform host name, so that a
// start fails rather than hangs on a name server that does not answer.
const lookupTimeout = 10 * time.Second

// add closes one platform address.
func (pl *platform) add(ctx context.Context, resolver Resolver, pa PlatformAddr) error {
	host, port, err := splitPlatformAddr(pa.Addr)
	if err != nil {
		return err
	}
	var addrs []netip.Addr
	switch a, err := netip.ParseAddr(host); {
	case host == "" || host == "localhost":
		pl.closeLocal(port, pa.What)
		return nil
	case err == nil:
		addrs = []netip.Addr{a}
	default:
		pl.closeName(host, port, pa.What)
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		addrs, err = resolver.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, a := range addrs {
		a = canonical(a)
		if a.IsLoopback() || a.IsUnspecified() {
			pl.closeLocal(port, pa.What)
			continue
		}
		ap := netip.AddrPortFrom(a, port)
		if _, dup := pl.addrs[ap]; !dup {
			pl.addrs[ap] = pa.What
		}
	}
	return nil
}

func (pl *platform) closeLocal(port uint16, what string) {
	if _, dup := pl.local[port]; !dup {
		pl.local[port] = what
	}
}

func (pl *platform) closeName(name string, port uint16, what string) {
	n := nameAt{name: name, port: port}
	if _, dup := pl.names[n]; !dup {
		pl.names[n] = what
	}
}

// interfaceAddrs are this machine's addresses.
func interfaceAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, canonical(a))
			}
		}
	}
	return out, nil
}

// Client returns an HTTP client that obeys p within what o allows (see
// the package Client).
func (o *Operator) Client(p Policy) *http.Client {
	p.operator = o
	return Client(p)
}

// platformAt reports what of the platform listens at port of a (canonical;
// invalid when only host is known), or of host as a URL names it.
func (o *Operator) platformAt(host string, a netip.Addr, port uint16) (string, bool) {
	if o == nil {
		return "", false
	}
	pl := &o.platform
	if host != "" {
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		if what, ok := pl.names[nameAt{name: name, port: port}]; ok {
			return what, true
		}
		if what, ok := pl.local[port]; ok && name == "localhost" {
			return what, true
		}
	}
	if !a.IsValid() {
		return "", false
	}
	if what, ok := pl.addrs[netip.AddrPortFrom(a, port)]; ok {
		return what, true
	}
	if what, ok := pl.local[port]; ok && pl.isLocal(a) {
		return what, true
	}
	return "", false
}

// isLocal reports whether a (canonical) reaches this machine.
func (pl *platform) isLocal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	return slices.Contains(pl.self, a)
}

// platformRefusal is the dialer's refusal of a platform address.
func (o *Operator) platformRefusal(host string, ap netip.AddrPort, what string) error {
	if host == ap.Addr().String() {
		return agent.Errorf(agent.CodeInvalid, "address %s is %s, a port of the platform's own, which no egress policy opens", ap, what)
	}
	return agent.Errorf(agent.CodeInvalid, "host %s resolves to %s, and port %d there is %s, a port of the platform's own, which no egress policy opens",
		host, ap.Addr(), ap.Port(), what)
}

// opensName reports whether the operator opened host by name at port.
func (o *Operator) opensName(host string, port uint16) bool {
	if o == nil {
		return false
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	return slices.Contains(o.names, nameAt{name, port})
}

// opens reports whether the operator opened a (canonical), of refused
// range r, at port.
func (o *Operator) opens(a netip.Addr, port uint16, r refusedRange) bool {
	if o.opensEveryPort(a, r) {
		return true
	}
	if o == nil {
		return false
	}
	return slices.Contains(o.addrs, netip.AddrPortFrom(a, port))
}

// opensEveryPort reports whether a CIDR or IP literal entry opened a
// (canonical), of refused range r: for a metadata address only an exact
// one.
func (o *Operator) opensEveryPort(a netip.Addr, r refusedRange) bool {
	if o == nil {
		return false
	}
	return opensAddr(o.prefixes, a, r)
}

// CheckEntry checks one entry of a tenant's allowlist: its form, as
// ParsePolicy reads it, and that the operator's policy allows what it
// names. An IP literal or CIDR entry of a refused range must lie wholly in
// what the operator opened; no entry may name a port of the platform's
// own. A host name entry is checked when its answers are dialled. The
// error is an *EntryError.
func (o *Operator) CheckEntry(entry string) error {
	var p Policy
	err := p.add(entry)
	switch {
	case err != nil:
	case len(p.prefixes) == 1:
		err = o.checkPrefix(p.prefixes[0])
	default:
		err = o.checkHost(p.hosts[0])
	}
	if err != nil {
		return &EntryError{Entry: entry, Err: err}
	}
	return nil
}

// checkHost checks a host entry of a tenant.
func (o *Operator) checkHost(h hostEntry) error {
	if !h.addr.IsValid() {
		if what, ok := o.platformAt(h.name, netip.Addr{}, h.port); ok && h.port != 0 {
			return fmt.Errorf("port %d of %s is %s; the platform's own ports stay closed whatever the operator opens (%s)", h.port, h.name, what, EnvAllow)
		}
		return nil
	}
	a := canonical(h.addr)
	r, special := refusedRangeOf(a)
	if what, ok := o.platformAt("", a, h.port); ok && h.port != 0 {
		if special {
			return fmt.Errorf("%s is %s and port %d is %s; the platform's own ports stay closed whatever the operator opens (%s)", h.addr, r.what, h.port, what, EnvAllow)
		}
		return fmt.Errorf("port %d of %s is %s; the platform's own ports stay closed whatever the operator opens (%s)", h.port, h.addr, what, EnvAllow)
	}
	switch {
	case !special:
		return nil
	case h.port == 0 && o.opensEveryPort(a, r), h.port != 0 && o.opens(a, h.port, r):
		return nil
	case h.port == 0 && o.opensSomePort(a):
		return fmt.Errorf("%s is %s; the operator has opened only some of its ports (%s): name the port, as in %s",
			h.addr, r.what, EnvAllow, netip.AddrPortFrom(h.addr, o.someOpenPort(a)))
	}
	return fmt.Errorf("%s is %s; the operator has not opened it (%s)", h.addr, r.what, EnvAllow)
}

func (o *Operator) opensSomePort(a netip.Addr) bool { return o.someOpenPort(a) != 0 }

func (o *Operator) someOpenPort(a netip.Addr) uint16 {
	if o == nil {
		return 0
	}
	for _, ap := range o.addrs {
		if ap.Addr() == a {
			return ap.Port()
		}
	}
	return 0
}

// checkPrefix checks a CIDR entry of a tenant: every refused range it
// overlaps must be opened by the operator where they overlap. A metadata
// address counts only for a single-address prefix, the one kind of CIDR
// entry that admits it.
func (o *Operator) checkPrefix(pfx netip.Prefix) error {
	if err := o.checkRanges(pfx, pfx.String()); err != nil {
		return err
	}
	// NAT64 addresses are checked as the IPv4 addresses they embed.
	if !pfx.Overlaps(nat64) {
		return nil
	}
	v4 := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if pfx.Bits() > nat64.Bits() {
		v4 = netip.PrefixFrom(canonical(pfx.Addr()), pfx.Bits()-nat64.Bits())
	}
	return o.checkRanges(v4, fmt.Sprintf("%s (the IPv4 addresses of its NAT64 part)", v4))
}

func (o *Operator) checkRanges(pfx netip.Prefix, shown string) error {
	for _, r := range refused {
		if !pfx.Overlaps(r.prefix) || r.metadata && !pfx.IsSingleIP() {
			continue
		}
		if pfx.Bits() >= r.prefix.Bits() {
			if !o.covers(pfx, r) {
				return fmt.Errorf("every address of %s is %s (%s); the operator has not opened all of it (%s)", shown, r.what, r.prefix, EnvAllow)
			}
			continue
		}
		if !o.covers(r.prefix, r) {
			return fmt.Errorf("%s includes %s, where every address is %s; the operator has not opened all of it (%s)", shown, r.prefix, r.what, EnvAllow)
		}
	}
	return nil
}

// covers reports whether the operator's CIDR and IP literal entries
// together open every address of q, which lies in refused range r.
func (o *Operator) covers(q netip.Prefix, r refusedRange) bool {
	if o == nil {
		return false
	}
	if r.metadata {
		return q.IsSingleIP() && o.opensEveryPort(q.Addr(), r)
	}
	inside := false
	for _, pfx := range o.prefixes {
		switch {
		case pfx.Addr().BitLen() != q.Addr().BitLen():
		case pfx.Bits() <= q.Bits() && pfx.Contains(q.Addr()):
			return true
		case q.Contains(pfx.Addr()):
			inside = true
		}
	}
	if !inside {
		return false
	}
	// Entries inside q may still cover it together: each half in turn.
	lo, hi := halves(q)
	return o.covers(lo, r) && o.covers(hi, r)
}

// halves splits q, which is not a single address, in two.
func halves(q netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := q.Bits()
	b := q.Addr().AsSlice()
	b[bits/8] |= 0x80 >> (bits % 8)
	hi, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(q.Addr(), bits+1), netip.PrefixFrom(hi, bits+1)
}
