package egress

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr    string // host:port as dialled
		entries []string
		want    string // "" when allowed, else part of the error
	}{
		{"8.8.8.8:443", nil, ""},
		{"1.1.1.1:443", nil, ""},
		{"172.32.0.1:443", nil, ""},
		{"100.128.0.1:443", nil, ""},
		{"[2606:4700::1111]:443", nil, ""},
		{"[64:ff9b::808:808]:443", nil, ""}, // NAT64 of 8.8.8.8

		{"10.0.0.1:443", nil, "a private address (10.0.0.0/8)"},
		{"172.16.0.1:443", nil, "a private address (172.16.0.0/12)"},
		{"172.31.255.255:443", nil, "a private address (172.16.0.0/12)"},
		{"192.168.1.1:443", nil, "a private address (192.168.0.0/16)"},
		{"127.0.0.1:443", nil, "a loopback address (127.0.0.0/8)"},
		{"127.255.255.254:443", nil, "a loopback address"},
		{"0.0.0.0:443", nil, "unspecified"},
		{"169.254.1.1:443", nil, "a link-local address (169.254.0.0/16)"},
		{"169.254.169.254:80", nil, "a cloud metadata address (169.254.169.254/32)"},
		{"169.254.170.2:80", nil, "a cloud metadata address"},
		{"100.100.100.200:80", nil, "a cloud metadata address"},
		{"168.63.129.16:80", nil, "a cloud metadata address"},
		{"100.64.0.1:443", nil, "carrier-grade NAT"},
		{"192.0.0.192:443", nil, "an IETF protocol address"},
		{"198.18.0.1:443", nil, "a benchmarking address"},
		{"224.0.0.1:443", nil, "a multicast address"},
		{"255.255.255.255:443", nil, "a reserved address"},
		{"[::1]:443", nil, "a loopback address (::1/128)"},
		{"[::]:443", nil, "the unspecified address"},
		{"[::ffff:10.0.0.1]:443", nil, "a private address (10.0.0.0/8)"},
		{"[::ffff:169.254.169.254]:80", nil, "a cloud metadata address"},
		{"[::127.0.0.1]:443", nil, "an IPv4-compatible address"},
		{"[64:ff9b::a00:1]:443", nil, "a private address (10.0.0.0/8)"}, // NAT64 of 10.0.0.1
		{"[64:ff9b:1::1]:443", nil, "a local-use NAT64 address"},
		{"[2002:a00:1::1]:443", nil, "a 6to4 address"},
		{"[fd00:ec2::254]:80", nil, "a cloud metadata address (fd00:ec2::254/128)"},
		{"[fc00::1]:443", nil, "a unique local (private) address (fc00::/7)"},
		{"[fd12:3456::1]:443", nil, "a unique local (private) address"},
		{"[fe80::1]:443", nil, "a link-local address (fe80::/10)"},
		{"[fe80::1%eth0]:443", nil, "a link-local address"},
		{"[fec0::1]:443", nil, "a site-local address"},
		{"[ff02::1]:443", nil, "a multicast address"},

		{"10.0.0.1:443", []string{"10.0.0.0/8"}, ""},
		{"10.1.2.3:443", []string{"10.1.2.0/24"}, ""},
		{"10.1.3.1:443", []string{"10.1.2.0/24"}, "a private address"},
		{"[::ffff:10.1.2.3]:443", []string{"10.1.2.0/24"}, ""},
		{"127.0.0.1:8080", []string{"127.0.0.1"}, ""},
		{"127.0.0.1:8080", []string{"127.0.0.1:8080"}, ""},
		{"127.0.0.1:9090", []string{"127.0.0.1:8080"}, "a loopback address"},
		{"127.0.0.1:8080", []string{"127.0.0.0/8"}, ""},
		{"[::1]:8080", []string{"::1"}, ""},
		{"[::1]:8080", []string{"127.0.0.0/8"}, "a loopback address"},
		{"[fd12::1]:443", []string{"fd12::/16"}, ""},
		{"169.254.169.254:80", []string{"169.254.0.0/16"}, "a cloud metadata address"},
		{"[fd00:ec2::254]:80", []string{"fd00::/8"}, "a cloud metadata address"},
		{"100.100.100.200:80", []string{"100.64.0.0/10"}, "a cloud metadata address"},
		{"169.254.169.254:80", []string{"169.254.169.254/32"}, ""},
		{"169.254.169.254:80", []string{"169.254.169.254"}, ""},
		{"127.0.0.1:443", []string{"localhost"}, "a loopback address"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.addr, " ", tt.entries), func(t *testing.T) {
			p, err := ParsePolicy(tt.entries)
			require.NoError(t, err)
			p.Tenant = "demo"
			p.operator = everything(t)
			ap := netip.MustParseAddrPort(tt.addr)
			err = p.checkAddr("api.example.com", ap)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "host api.example.com resolves to ")
			require.ErrorContains(t, err, "which tenant demo's egress allowlist does not include")
			require.True(t, agent.IsCode(err, agent.CodeInvalid))
		})
	}
}
