package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// everything is an operator that opens every address, metadata ones
// included, so that a test's tenant entries decide.
func everything(t *testing.T) *Operator {
	t.Helper()
	o, err := OpenOperator("0.0.0.0/0", "::/0", "169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16", "fd00:ec2::254")
	require.NoError(t, err)
	return o
}

// dns answers lookups from a table.
type dns map[string][]string

func (d dns) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range d[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// platformOf is the platform of a stack like the one tests run: Temporal's
// frontend (gRPC and HTTP) and Postgres on loopback, the gateway on every
// address, and a database server elsewhere by name.
func platformOf() []PlatformAddr {
	return []PlatformAddr{
		{Addr: "127.0.0.1:7233", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"},
		{Addr: "127.0.0.1:7243", What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"},
		{Addr: "localhost:5432", What: "Postgres", From: "DATABASE_URL"},
		{Addr: "0.0.0.0:50051", What: "the gateway's gRPC API", From: "AGENTFLOW_GRPC_ADDR"},
		{Addr: ":9090", What: "the health and metrics endpoint", From: "AGENTFLOW_HTTP_ADDR"},
		{Addr: "db.internal:5433", What: "a platform address", From: EnvPlatformAddrs},
		{Addr: "10.9.9.9:8233", What: "a platform address", From: EnvPlatformAddrs},
	}
}

func newOperator(t *testing.T, allow ...string) *Operator {
	t.Helper()
	o, err := NewOperator(context.Background(), OperatorConfig{Allow: allow, Platform: platformOf(),
		Resolver: dns{"db.internal": {"10.0.5.5", "fd12::5"}}})
	require.NoError(t, err)
	return o
}

func TestParseAllow(t *testing.T) {
	entries, err := ParseAllow(" 10.0.0.0/8, 127.0.0.1:8089,,[::1]:80 , flights.internal:8089, 169.254.169.254 ,fd00::/8,")
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.0/8", "127.0.0.1:8089", "[::1]:80", "flights.internal:8089", "169.254.169.254", "fd00::/8"}, entries)
	entries, err = ParseAllow("")
	require.NoError(t, err)
	require.Empty(t, entries)

	tests := []struct{ value, want string }{
		{"10.0.0.0/33", `AGENTFLOW_EGRESS_ALLOW entry "10.0.0.0/33": not a CIDR prefix`},
		{"10.0.0.1/8", `did you mean 10.0.0.0/8?`},
		{"http://127.0.0.1:8089", "write a host, not a URL"},
		{"flights.internal", "name the port too, as in flights.internal:443"},
		{"*.corp.internal:443", "a wildcard is not allowed here"},
		{"127.0.0.1:0", "port 0 is not a port"},
		{"127.0.0.1:99999", `port "99999" is not in 1..65535`},
		{"fe80::1%eth0", "zone"},
		{"64:ff9b::7f00:1", "NAT64"},
		{"64:ff9b::7f00:0/104", "NAT64"},
		{"::ffff:127.0.0.0/104", "IPv4 form"},
		{"127.1:80", "neither a host name nor an IP address"},
		{"ok.internal:80, bad host:80", `entry "bad host:80"`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			_, err := ParseAllow(tt.value)
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, EnvAllow)
		})
	}
}

func TestParsePlatformAddrs(t *testing.T) {
	entries, err := ParsePlatformAddrs("temporal-ui:8080, 127.0.0.1:8233,[::1]:7243,:8080")
	require.NoError(t, err)
	require.Equal(t, []string{"temporal-ui:8080", "127.0.0.1:8233", "[::1]:7243", ":8080"}, entries)

	tests := []struct{ value, want string }{
		{"temporal-ui", "want host:port"},
		{"temporal-ui:0", `port "0" is not in 1..65535`},
		{"temporal-ui:http", `port "http" is not in 1..65535`},
		{"[fe80::1%eth0]:80", "zone"},
		{"temporal_ui:80", "character '_'"},
		{"http://x:80", "want host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			_, err := ParsePlatformAddrs(tt.value)
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, EnvPlatformAddrs+` entry "`)
		})
	}
}

// An operator may not open the platform's own ports, and a platform
// address that cannot be read or resolved fails at start.
func TestNewOperatorErrors(t *testing.T) {
	tests := []struct {
		name     string
		allow    []string
		platform []PlatformAddr
		want     string
	}{
		{"opens a platform port", []string{"127.0.0.1:7243"}, platformOf(),
			`AGENTFLOW_EGRESS_ALLOW entry "127.0.0.1:7243": 127.0.0.1:7243 is the Temporal frontend's HTTP API, a port of the platform's own, which stays closed`},
		{"opens a local platform port at another loopback address", []string{"127.0.0.2:50051"}, platformOf(), "the gateway's gRPC API"},
		{"opens a platform name", []string{"db.internal:5433"}, platformOf(), `port 5433 of db.internal is a platform address`},
		{"opens a resolved platform address", []string{"10.0.5.5:5433"}, platformOf(), "10.0.5.5:5433 is a platform address"},
		{"unresolvable", nil, []PlatformAddr{{Addr: "nowhere.internal:7233", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"}},
			`TEMPORAL_ADDRESS: platform address "nowhere.internal:7233" (the Temporal frontend's gRPC API): lookup nowhere.internal`},
		{"no port", nil, []PlatformAddr{{Addr: "temporal", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"}}, "want host:port"},
		{"bad allow entry", []string{"flights"}, nil, `AGENTFLOW_EGRESS_ALLOW entry "flights": name the port too`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOperator(context.Background(), OperatorConfig{Allow: tt.allow, Platform: tt.platform,
				Resolver: dns{"db.internal": {"10.0.5.5"}}})
			require.ErrorContains(t, err, tt.want)
		})
	}
	// Opening a range that holds platform ports is fine: they stay closed.
	_, err := NewOperator(context.Background(), OperatorConfig{Allow: []string{"127.0.0.0/8", "10.0.0.0/8", "127.0.0.1"}, Platform: platformOf(),
		Resolver: dns{"db.internal": {"10.0.5.5"}}})
	require.NoError(t, err)
}

// TestCheckEntry is the check a tenant's entry gets when a catalog is
// applied, under several operator policies.
func TestCheckEntry(t *testing.T) {
	var none *Operator // no configuration at all
	def := newOperator(t)
	loop := newOperator(t, "127.0.0.0/8")
	some := newOperator(t, "10.1.0.0/16", "10.2.3.4:8443", "169.254.0.0/16", "fd12::/16", "flights.internal:8089")
	halves := newOperator(t, "10.0.0.0/9", "10.128.0.0/10", "10.192.0.0/10")
	meta := newOperator(t, "169.254.169.254", "fd00:ec2::254/128")
	tests := []struct {
		name  string
		op    *Operator
		entry string
		want  string // "" when allowed
	}{
		// Under the default policy: names and public addresses only.
		{"name", def, "api.example.com", ""},
		{"wildcard", def, "*.example.com:8443", ""},
		{"public ip", def, "203.0.113.7", ""},
		{"public cidr", def, "203.0.113.0/24", ""},
		{"public ipv6 cidr", def, "2001:db8::/32", ""},
		{"loopback", def, "127.0.0.1:8089", "127.0.0.1 is a loopback address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)"},
		{"loopback cidr", def, "127.0.0.0/8", "every address of 127.0.0.0/8 is a loopback address (127.0.0.0/8); the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)"},
		{"everything", def, "0.0.0.0/0", "0.0.0.0/0 includes 0.0.0.0/8, where every address is an unspecified (this-network) address; the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)"},
		{"every ipv6 address", def, "::/0", "::/0 includes ::/128"},
		{"metadata", def, "169.254.169.254", "169.254.169.254 is a cloud metadata address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)"},
		{"ipv6 metadata", def, "fd00:ec2::254", "fd00:ec2::254 is a cloud metadata address; the operator has not opened it"},
		{"metadata as a cidr", def, "169.254.169.254/32", "every address of 169.254.169.254/32 is a cloud metadata address"},
		{"private", def, "10.1.2.0/24", "every address of 10.1.2.0/24 is a private address (10.0.0.0/8)"},
		{"ipv6 loopback", def, "[::1]:80", "::1 is a loopback address"},
		{"mapped loopback", def, "::ffff:127.0.0.1", "127.0.0.1 is a loopback address"},
		{"nat64 loopback", def, "64:ff9b::7f00:1", "64:ff9b::7f00:1 is a loopback address"},
		{"nat64 prefix", def, "64:ff9b::/96", "0.0.0.0/0 (the IPv4 addresses of its NAT64 part) includes 0.0.0.0/8"},
		{"nat64 of a public prefix", def, "64:ff9b::cb00:7100/120", ""},
		{"nat64 of a private prefix", def, "64:ff9b::a00:0/104", "every address of 10.0.0.0/8 (the IPv4 addresses of its NAT64 part) is a private address"},
		{"bad form", def, "http://x", "write a host, not a URL"},
		{"nil operator: name", none, "api.example.com:443", ""},
		{"nil operator: loopback", none, "127.0.0.1:8089", "127.0.0.1 is a loopback address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)"},
		{"nil operator: metadata", none, "169.254.169.254/32", "cloud metadata"},

		// Platform ports, whatever is opened.
		{"temporal http api", loop, "127.0.0.1:7243", "127.0.0.1 is a loopback address and port 7243 is the Temporal frontend's HTTP API; the platform's own ports stay closed whatever the operator opens (AGENTFLOW_EGRESS_ALLOW)"},
		{"temporal grpc api", loop, "127.0.0.1:7233", "port 7233 is the Temporal frontend's gRPC API"},
		{"local port at another loopback address", loop, "127.0.0.9:5432", "port 5432 is Postgres"},
		{"local port at the unspecified address", def, "0.0.0.0:50051", "port 50051 is the gateway's gRPC API"},
		{"local port by name", def, "localhost:9090", "port 9090 of localhost is the health and metrics endpoint"},
		{"ipv6 loopback platform port", loop, "[::1]:7243", "::1 is a loopback address and port 7243 is the Temporal frontend's HTTP API"},
		{"platform name", def, "db.internal:5433", "port 5433 of db.internal is a platform address"},
		{"platform name's address", some, "10.0.5.5:5433", "10.0.5.5 is a private address and port 5433 is a platform address"},
		{"platform ipv6 address", some, "[fd12::5]:5433", "port 5433 is a platform address"},
		{"platform address elsewhere", some, "10.9.9.9:8233", "port 8233 is a platform address"},
		{"a platform host at another port", loop, "127.0.0.1:8089", ""},
		{"a platform host at every port", loop, "127.0.0.1", ""},
		{"a range holding platform ports", loop, "127.0.0.0/8", ""},
		{"a platform name at every port", def, "db.internal", ""},

		// Within what the operator opened.
		{"inside an opened cidr", some, "10.1.2.0/24", ""},
		{"an opened cidr", some, "10.1.0.0/16", ""},
		{"wider than the opened cidr", some, "10.0.0.0/8", "every address of 10.0.0.0/8 is a private address (10.0.0.0/8); the operator has not opened all of it"},
		{"ip in an opened cidr", some, "10.1.9.9:80", ""},
		{"ip:port opened", some, "10.2.3.4:8443", ""},
		{"ip:port at another port", some, "10.2.3.4:8444", "10.2.3.4 is a private address; the operator has not opened it"},
		{"ip of an opened ip:port at every port", some, "10.2.3.4", "the operator has opened only some of its ports (AGENTFLOW_EGRESS_ALLOW): name the port, as in 10.2.3.4:8443"},
		{"link-local opened", some, "169.254.1.0/24", ""},
		{"metadata inside an opened cidr", some, "169.254.169.254", "169.254.169.254 is a cloud metadata address; the operator has not opened it"},
		{"a cidr holding metadata inside an opened cidr", some, "169.254.0.0/16", ""},
		{"ipv6 opened", some, "fd12:1::/32", ""},
		{"ipv6 metadata not opened by fd12::/16", some, "fd00:ec2::254", "cloud metadata"},
		{"opened name", some, "flights.internal:8089", ""},
		{"opened cidrs together", halves, "10.0.0.0/8", ""},
		{"opened cidrs together, one of them", halves, "10.64.0.0/10", ""},
		{"opened cidrs with a gap", newOperator(t, "10.0.0.0/9", "10.192.0.0/10"), "10.0.0.0/8",
			"every address of 10.0.0.0/8 is a private address"},
		{"metadata opened exactly", meta, "169.254.169.254", ""},
		{"metadata opened exactly, with a port", meta, "169.254.169.254:80", ""},
		{"metadata opened exactly, as a cidr", meta, "169.254.169.254/32", ""},
		{"ipv6 metadata opened exactly", meta, "[fd00:ec2::254]:80", ""},
		{"metadata opened exactly does not open its range", meta, "169.254.0.0/16", "every address of 169.254.0.0/16 is a link-local address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op.CheckEntry(tt.entry)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			var e *EntryError
			require.True(t, errors.As(err, &e))
			require.Equal(t, tt.entry, e.Entry)
			require.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("egress entry %q: ", tt.entry)), err.Error())
		})
	}
}

// TestOperatorCheckAddr is the dialer's check of an address at both
// levels, for an allowlist whether or not it passed CheckEntry.
func TestOperatorCheckAddr(t *testing.T) {
	loop := newOperator(t, "127.0.0.0/8", "flights.internal:8089", "10.3.0.0/16")
	tests := []struct {
		name    string
		op      *Operator
		entries []string
		host    string // as the URL names it
		addr    string // dialled
		want    string // "" when allowed
	}{
		{"public address", nil, []string{"api.example.com"}, "api.example.com", "203.0.113.7:443", ""},
		{"default operator: loopback the tenant lists", nil, []string{"127.0.0.1:8089"}, "127.0.0.1", "127.0.0.1:8089",
			"address 127.0.0.1 is a loopback address (127.0.0.0/8), which the operator's egress policy does not open (AGENTFLOW_EGRESS_ALLOW)"},
		{"default operator: metadata the tenant lists", nil, []string{"169.254.169.254"}, "169.254.169.254", "169.254.169.254:80",
			"address 169.254.169.254 is a cloud metadata address (169.254.169.254/32), which the operator's egress policy does not open"},
		{"default operator: a name resolving to private", nil, []string{"api.example.com", "10.0.0.0/8"}, "api.example.com", "10.0.0.1:443",
			"host api.example.com resolves to 10.0.0.1, a private address (10.0.0.0/8), which the operator's egress policy does not open"},
		{"tenant refusal comes first", nil, []string{"api.example.com"}, "api.example.com", "127.0.0.1:443",
			"which tenant demo's egress allowlist does not include"},
		{"opened and listed", loop, []string{"127.0.0.1:8089"}, "127.0.0.1", "127.0.0.1:8089", ""},
		{"opened, not listed", loop, []string{"api.example.com"}, "api.example.com", "127.0.0.1:8089", "which tenant demo's egress allowlist does not include"},
		{"temporal http api listed exactly", loop, []string{"127.0.0.1:7243"}, "127.0.0.1", "127.0.0.1:7243",
			"address 127.0.0.1:7243 is the Temporal frontend's HTTP API, a port of the platform's own, which no egress policy opens"},
		{"temporal http api under a cidr", loop, []string{"127.0.0.0/8"}, "127.0.0.1", "127.0.0.1:7243", "the Temporal frontend's HTTP API"},
		{"temporal http api by a name", loop, []string{"api.example.com", "127.0.0.0/8"}, "api.example.com", "127.0.0.1:7243",
			"host api.example.com resolves to 127.0.0.1, and port 7243 there is the Temporal frontend's HTTP API, a port of the platform's own"},
		{"local port at another loopback address", loop, []string{"127.0.0.0/8"}, "127.0.0.5", "127.0.0.5:9090", "the health and metrics endpoint"},
		{"local port at the unspecified address", everything(t), []string{"0.0.0.0/8"}, "0.0.0.0", "0.0.0.0:50051", ""}, // everything knows no platform
		{"local port by localhost", loop, []string{"localhost", "127.0.0.0/8"}, "localhost", "127.0.0.1:50051", "the gateway's gRPC API"},
		{"mapped", loop, []string{"127.0.0.0/8"}, "::ffff:127.0.0.1", "[::ffff:127.0.0.1]:7243", "the Temporal frontend's HTTP API"},
		{"nat64", loop, []string{"64:ff9b::/96"}, "64:ff9b::7f00:1", "[64:ff9b::7f00:1]:7243", "the Temporal frontend's HTTP API"},
		{"platform name", loop, []string{"db.internal"}, "db.internal", "203.0.113.9:5433", "port 5433 there is a platform address"},
		{"platform name's address", loop, []string{"10.0.0.0/8"}, "10.0.5.5", "10.0.5.5:5433", "address 10.0.5.5:5433 is a platform address"},
		{"name opened by the operator", loop, []string{"flights.internal:8089"}, "flights.internal", "172.18.0.5:8089", ""},
		{"name opened by the operator, another port", loop, []string{"flights.internal"}, "flights.internal", "172.18.0.5:8090",
			"host flights.internal resolves to 172.18.0.5, a private address (172.16.0.0/12), which tenant demo's egress allowlist does not include"},
		{"name opened by the operator, not metadata", loop, []string{"flights.internal:8089"}, "flights.internal", "169.254.169.254:8089", "a cloud metadata address"},
		{"another name at an opened address", loop, []string{"evil.example.com:8089"}, "evil.example.com", "172.18.0.5:8089", "which tenant demo's egress allowlist does not include"},
		{"opened cidr, listed cidr", loop, []string{"10.3.4.0/24"}, "10.3.4.5", "10.3.4.5:443", ""},
		{"listed cidr wider than the opened one", loop, []string{"10.0.0.0/8"}, "10.4.0.1", "10.4.0.1:443",
			"address 10.4.0.1 is a private address (10.0.0.0/8), which the operator's egress policy does not open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy(tt.entries)
			require.NoError(t, err)
			p.Tenant, p.operator = "demo", tt.op
			err = p.checkAddr(tt.host, netip.MustParseAddrPort(tt.addr))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.True(t, agent.IsCode(err, agent.CodeInvalid))
		})
	}
}

// A port of a listener on every address is closed on this machine's own
// addresses too, not only on loopback.
func TestPlatformOnOwnAddresses(t *testing.T) {
	self, err := interfaceAddrs()
	require.NoError(t, err)
	o := newOperator(t, "0.0.0.0/0", "::/0")
	var checked int
	for _, a := range self {
		if a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		what, ok := o.platformAt("", a, 50051)
		require.True(t, ok, "%s:50051", a)
		require.Equal(t, "the gateway's gRPC API", what)
		_, ok = o.platformAt("", a, 50052)
		require.False(t, ok, "%s:50052", a)
		checked++
	}
	t.Logf("checked %d addresses of this machine", checked)
	// An exact platform address is not closed elsewhere.
	_, ok := o.platformAt("", netip.MustParseAddr("10.9.9.8"), 8233)
	require.False(t, ok)
}

func TestHalves(t *testing.T) {
	lo, hi := halves(netip.MustParsePrefix("10.0.0.0/8"))
	require.Equal(t, "10.0.0.0/9", lo.String())
	require.Equal(t, "10.128.0.0/9", hi.String())
	lo, hi = halves(netip.MustParsePrefix("fc00::/7"))
	require.Equal(t, "fc00::/8", lo.String())
	require.Equal(t, "fd00::/8", hi.String())
	lo, hi = halves(netip.MustParsePrefix("10.0.0.2/31"))
	require.Equal(t, "10.0.0.2/32", lo.String())
	require.Equal(t, "10.0.0.3/32", hi.String())
}
