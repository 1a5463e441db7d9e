package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParsePolicy: any allowlist is a policy or an error naming the
// entry, never a panic.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com", "127.0.0.1:8089", "10.0.0.0/8", "[::1]:80", "", "http://x", "*.", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entries string) {
		list := strings.Split(entries, ",")
		_, err := ParsePolicy(list)
		if err != nil {
			require.NotEmpty(t, err.Error())
		}
	})
}

// FuzzOperatorConfig: any AGENTFLOW_EGRESS_ALLOW and
// AGENTFLOW_PLATFORM_ADDRS value is entries or an error naming the
// variable and the entry, never a panic; what the parsers accept
// NewOperator builds from (a platform host name resolving to a public
// address), and the operator then checks any tenant entry without a
// panic.
func FuzzOperatorConfig(f *testing.F) {
	for _, s := range [][3]string{
		{"127.0.0.1:8089,10.0.0.0/8", "temporal:7243", "127.0.0.1:8089"},
		{" flights.internal:8089 , ::1", ":9090,[::1]:7233", "0.0.0.0/0"},
		{"169.254.169.254,fd00:ec2::254/128", "localhost:5432,0.0.0.0:50051", "169.254.169.254"},
		{"10.0.0.0/9,10.128.0.0/9", "10.0.0.1:8233", "10.0.0.0/8"},
		{"*.x:1,http://a,1.2.3.4/33,,", "x,:0,[fe80::1%e]:1", "64:ff9b::/96"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, allowValue, platformValue, tenantEntry string) {
		allow, err := ParseAllow(allowValue)
		if err != nil {
			require.ErrorContains(t, err, EnvAllow+" entry ")
			allow = nil
		}
		addrs, err := ParsePlatformAddrs(platformValue)
		if err != nil {
			require.ErrorContains(t, err, EnvPlatformAddrs+" entry ")
			addrs = nil
		}
		var platform []PlatformAddr
		for _, a := range addrs {
			platform = append(platform, PlatformAddr{Addr: a, What: "a platform address", From: EnvPlatformAddrs})
		}
		o, err := NewOperator(context.Background(), OperatorConfig{Allow: allow, Platform: platform, Resolver: public{}})
		if err != nil {
			// Only an opened entry that names a platform port is refused.
			require.ErrorContains(t, err, "a port of the platform's own, which stays closed")
			return
		}
		if err := o.CheckEntry(tenantEntry); err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "egress entry "), err.Error())
		}
	})
}

// public resolves every name to a documentation address.
type public struct{}

func (public) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("203.0.113.10")}, nil
}
