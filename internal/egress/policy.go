package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// Defaults of Policy's caps.
const (
	DefaultMaxResponseBytes = 10 << 20
	DefaultTimeout          = 30 * time.Second
	DefaultMaxRedirects     = 5
)

// Policy is one tenant's egress policy. Build it with ParsePolicy, then set
// Tenant and, where the catalog says so, the caps.
type Policy struct {
	// Tenant names the tenant in error messages.
	Tenant string
	// MaxResponseBytes caps a response body. Default (0 or less):
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Timeout bounds a whole call: dialling, redirects and reading the
	// body. Default (0 or less): DefaultTimeout.
	Timeout time.Duration
	// MaxRedirects is how many redirects one call may follow. Default (0):
	// DefaultMaxRedirects; negative: none.
	MaxRedirects int
	// Resolver looks up host names. Default (nil): net.DefaultResolver.
	// Tests set it to make a name resolve where they need.
	Resolver Resolver

	hosts    []hostEntry
	prefixes []netip.Prefix
	// operator bounds what the entries may admit; nil is the default
	// operator policy. Operator.Client sets it.
	operator *Operator
}

// Resolver looks up the addresses of a host; *net.Resolver implements it.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// hostEntry is one host entry of the allowlist.
type hostEntry struct {
	name     string     // lower case, no trailing dot; for a wildcard, the part after "*."
	wildcard bool       // name's subdomains, not name itself
	addr     netip.Addr // set for an IP literal, then name is empty
	port     uint16     // 0: any port
}

// EntryError is ParsePolicy's error: which entry is wrong and why.
type EntryError struct {
	Index int // in the slice given to ParsePolicy
	Entry string
	Err   error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("egress entry %q: %v", e.Entry, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// ParsePolicy reads an allowlist (see the package doc for the forms of
// entries). The error for a bad entry is an *EntryError.
func ParsePolicy(entries []string) (Policy, error) {
	var p Policy
	for i, s := range entries {
		if err := p.add(s); err != nil {
			return Policy{}, &EntryError{Index: i, Entry: s, Err: err}
		}
	}
	return p, nil
}

func (p *Policy) add(s string) error {
	pfx, h, err := parseEntry(s)
	switch {
	case err != nil:
		return err
	case pfx.IsValid():
		p.prefixes = append(p.prefixes, pfx)
	default:
		p.hosts = append(p.hosts, h)
	}
	return nil
}

// parseEntry reads one entry of an allow list: a CIDR prefix (then pfx is
// valid) or a host.
func parseEntry(s string) (pfx netip.Prefix, h hostEntry, err error) {
	switch {
	case s == "":
		return netip.Prefix{}, hostEntry{}, errors.New("empty entry")
	case strings.Contains(s, "://"):
		return netip.Prefix{}, hostEntry{}, errors.New("write a host, not a URL")
	case strings.Contains(s, "/"):
		pfx, err = parsePrefix(s)
		return pfx, hostEntry{}, err
	}
	h, err = parseHost(s)
	return netip.Prefix{}, h, err
}

// parsePrefix reads a CIDR entry.
func parsePrefix(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not a CIDR prefix such as 10.1.2.0/24")
	}
	if pfx.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("write an IPv4 prefix in IPv4 form")
	}
	if pfx != pfx.Masked() {
		return netip.Prefix{}, fmt.Errorf("address bits beyond /%d are set; did you mean %s?", pfx.Bits(), pfx.Masked())
	}
	return pfx, nil
}

func parseHost(s string) (hostEntry, error) {
	bare := s
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		bare = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(bare); err == nil {
		return ipEntry(a, 0)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return hostEntry{}, errors.New("port 0 is not a port")
		}
		return ipEntry(ap.Addr(), ap.Port())
	}
	name, port := s, uint16(0)
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		n, err := strconv.ParseUint(s[i+1:], 10, 16)
		if err != nil || n == 0 {
			return hostEntry{}, fmt.Errorf("port %q is not in 1..65535", s[i+1:])
		}
		name, port = s[:i], uint16(n)
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	name, wildcard := strings.CutPrefix(name, "*.")
	if err := checkName(name); err != nil {
		return hostEntry{}, err
	}
	if wildcard && !strings.Contains(name, ".") {
		return hostEntry{}, fmt.Errorf("*.%s is too broad: name a domain, as in *.example.com", name)
	}
	return hostEntry{name: name, wildcard: wildcard, port: port}, nil
}

func ipEntry(a netip.Addr, port uint16) (hostEntry, error) {
	if a.Zone() != "" {
		return hostEntry{}, errors.New("an IPv6 zone is not allowed")
	}
	return hostEntry{addr: a.Unmap(), port: port}, nil
}

// checkName checks a host name by the rules of RFC 1123: letters, digits
// and hyphens, in labels of at most 63 characters. A name whose last label
// is all digits is refused, since resolvers read names like 127.1 or
// 2130706433 as IPv4 addresses.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty host name")
	}
	if len(name) > 253 {
		return errors.New("host name is longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		switch {
		case l == "":
			return fmt.Errorf("host name %q has an empty label", name)
		case strings.Contains(l, "*"):
			return errors.New("a wildcard may only be the whole first label, as in *.example.com")
		case len(l) > 63:
			return fmt.Errorf("label %q is longer than 63 characters", l)
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for _, c := range l {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Errorf("host name %q has the character %q; write international names in their xn-- form", name, c)
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%q is neither a host name nor an IP address", name)
	}
	return nil
}

// Admits reports whether the allowlist names u's host (and port): a
// request to u is checked by name as the policy's clients check it, its
// addresses aside. For a list of hosts that is not an egress policy but
// reads like one, such as the document hosts an openapi_action entry
// allows (ParsePolicy reads it).
func (p *Policy) Admits(u *url.URL) bool { return p.checkURL(u) == nil }

// checkURL checks a request's URL by name: its scheme and its host against
// the allowlist. The addresses are checked when they are dialled.
func (p *Policy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return agent.Errorf(agent.CodeInvalid, "scheme %q of %s is not allowed: use http or https", u.Scheme, shown(u))
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return agent.Errorf(agent.CodeInvalid, "URL %s names no host", shown(u))
	}
	port := defaultPort(u)
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.WithZone("").Unmap()
		for _, pfx := range p.prefixes {
			if pfx.Contains(a) {
				return nil
			}
		}
		host = a.String()
	}
	matched := false
	for _, h := range p.hosts {
		if h.matches(host) {
			if h.port == 0 || strconv.Itoa(int(h.port)) == port {
				return nil
			}
			matched = true
		}
	}
	if matched {
		return agent.Errorf(agent.CodeInvalid, "port %s of host %s is not in %s", port, host, p.allowlist())
	}
	return agent.Errorf(agent.CodeInvalid, "host %s is not in %s", host, p.allowlist())
}

// matches reports whether the entry names host (lower case, no trailing
// dot; an IP literal in netip's canonical form), ignoring the port.
func (h hostEntry) matches(host string) bool {
	switch {
	case h.addr.IsValid():
		return h.addr.String() == host
	case h.wildcard:
		return strings.HasSuffix(host, "."+h.name)
	default:
		return host == h.name
	}
}

func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func (p *Policy) allowlist() string {
	if p.Tenant == "" {
		return "the egress allowlist"
	}
	return "tenant " + p.Tenant + "'s egress allowlist"
}

func (p *Policy) maxResponseBytes() int64 {
	if p.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return p.MaxResponseBytes
}

func (p *Policy) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

func (p *Policy) maxRedirects() int {
	switch {
	case p.MaxRedirects < 0:
		return 0
	case p.MaxRedirects == 0:
		return DefaultMaxRedirects
	}
	return p.MaxRedirects
}

// shown is u as error messages show it: without user info, query and
// fragment, where tools put credentials and the model's arguments.
func shown(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return v.String()
}
