package egress

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
)

// refusedRange is a block of addresses that are not the public internet.
type refusedRange struct {
	prefix netip.Prefix
	what   string
	// metadata marks cloud metadata endpoints, which hand out credentials:
	// only an exact entry admits them, not a CIDR that happens to cover them.
	metadata bool
}

// refused lists the ranges the dialer refuses unless the policy names them.
// Exact addresses come first, so that a message names the most specific
// range. IPv4-mapped IPv6 addresses are checked as IPv4, and NAT64
// addresses (64:ff9b::/96) as the IPv4 address they embed.
var refused = []refusedRange{
	{prefix: netip.MustParsePrefix("169.254.169.254/32"), what: "a cloud metadata address", metadata: true}, // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
	{prefix: netip.MustParsePrefix("169.254.170.2/32"), what: "a cloud metadata address", metadata: true},   // AWS ECS task credentials
	{prefix: netip.MustParsePrefix("100.100.100.200/32"), what: "a cloud metadata address", metadata: true}, // Alibaba Cloud
	{prefix: netip.MustParsePrefix("168.63.129.16/32"), what: "a cloud metadata address", metadata: true},   // Azure WireServer; a public address, so listed on its own
	{prefix: netip.MustParsePrefix("fd00:ec2::254/128"), what: "a cloud metadata address", metadata: true},  // AWS over IPv6

	{prefix: netip.MustParsePrefix("0.0.0.0/8"), what: "an unspecified (this-network) address"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), what: "a private address"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), what: "a shared (carrier-grade NAT) address"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), what: "a loopback address"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), what: "a link-local address"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), what: "a private address"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), what: "an IETF protocol address"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), what: "a private address"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), what: "a benchmarking address"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), what: "a multicast address"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), what: "a reserved address"}, // and the broadcast address

	{prefix: netip.MustParsePrefix("::/128"), what: "the unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), what: "a loopback address"},
	{prefix: netip.MustParsePrefix("::/96"), what: "an IPv4-compatible address"}, // deprecated; some stacks route it to the IPv4 address
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), what: "a local-use NAT64 address"},
	{prefix: netip.MustParsePrefix("100::/64"), what: "a discard-only address"},
	{prefix: netip.MustParsePrefix("2002::/16"), what: "a 6to4 address"}, // deprecated; embeds an IPv4 address
	{prefix: netip.MustParsePrefix("fc00::/7"), what: "a unique local (private) address"},
	{prefix: netip.MustParsePrefix("fec0::/10"), what: "a site-local address"},
	{prefix: netip.MustParsePrefix("fe80::/10"), what: "a link-local address"},
	{prefix: netip.MustParsePrefix("ff00::/8"), what: "a multicast address"},
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// canonical is the address a stands for: a without its zone, and the IPv4
// address an IPv4-mapped or NAT64 address embeds.
func canonical(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// refusedRangeOf returns the refused range a lies in.
func refusedRangeOf(a netip.Addr) (refusedRange, bool) {
	a = canonical(a)
	for _, r := range refused {
		if r.prefix.Contains(a) {
			return r, true
		}
	}
	return refusedRange{}, false
}

// checkAddr checks an address that host resolved to before it is dialled,
// at both levels: the platform's own ports are refused whatever either
// level says; an address of a refused range needs the tenant's allowlist
// to name it (an IP literal or CIDR entry) and the operator to have opened
// it, or the operator to have opened host by name at that port.
func (p *Policy) checkAddr(host string, ap netip.AddrPort) error {
	a := ap.Addr().WithZone("").Unmap()
	if what, ok := p.operator.platformAt(host, canonical(a), ap.Port()); ok {
		return p.operator.platformRefusal(host, netip.AddrPortFrom(a, ap.Port()), what)
	}
	r, ok := refusedRangeOf(a)
	if !ok {
		return nil
	}
	if !r.metadata && p.operator.opensName(host, ap.Port()) {
		// The operator vouches for the name's answers; checkURL found the
		// name in the tenant's allowlist.
		return nil
	}
	if !p.admits(a, ap.Port(), r) {
		return agent.Errorf(agent.CodeInvalid, "%s, which %s does not include", resolvesTo(host, a, r), p.allowlist())
	}
	if !p.operator.opens(canonical(a), ap.Port(), r) {
		return agent.Errorf(agent.CodeInvalid, "%s, which the operator's egress policy does not open (%s)", resolvesTo(host, a, r), EnvAllow)
	}
	return nil
}

// admits reports whether the tenant's entries name a, of refused range r:
// an IP literal entry, or a CIDR entry (for a metadata address only an
// exact one).
func (p *Policy) admits(a netip.Addr, port uint16, r refusedRange) bool {
	for _, h := range p.hosts {
		if h.addr == a && (h.port == 0 || h.port == port) {
			return true
		}
	}
	return opensAddr(p.prefixes, a, r)
}

// opensAddr reports whether one of prefixes holds a, of refused range r
// (a metadata address only as a single-address prefix).
func opensAddr(prefixes []netip.Prefix, a netip.Addr, r refusedRange) bool {
	return slices.ContainsFunc(prefixes, func(pfx netip.Prefix) bool { return pfx.Contains(a) && (!r.metadata || pfx.IsSingleIP()) })
}

// resolvesTo says what a is, as host gave it.
func resolvesTo(host string, a netip.Addr, r refusedRange) string {
	if host == a.String() {
		return fmt.Sprintf("address %s is %s (%s)", a, r.what, r.prefix)
	}
	return fmt.Sprintf("host %s resolves to %s, %s (%s)", host, a, r.what, r.prefix)
}
