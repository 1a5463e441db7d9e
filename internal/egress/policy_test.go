package egress

import (
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		entry string
		want  string
	}{
		{"", "empty entry"},
		{"https://api.example.com", "write a host, not a URL"},
		{"10.1.2.0/33", "not a CIDR prefix"},
		{"example.com/24", "not a CIDR prefix"},
		{"10.1.2.3/24", "did you mean 10.1.2.0/24?"},
		{"::ffff:10.0.0.0/104", "IPv4 form"},
		{"api.example.com:0", `port "0" is not in 1..65535`},
		{"api.example.com:65536", `port "65536" is not in 1..65535`},
		{"api.example.com:", `port "" is not in 1..65535`},
		{"api.example.com:https", `port "https" is not in 1..65535`},
		{"[::1]:0", "port 0 is not a port"},
		{"fe80::1%eth0", "zone"},
		{"*", "whole first label"},
		{".", "empty host name"},
		{"*.com", "too broad"},
		{"api.*.example.com", "whole first label"},
		{"*api.example.com", "whole first label"},
		{"api..example.com", "empty label"},
		{"-api.example.com", "hyphen"},
		{"api_v2.example.com", "character '_'"},
		{"bücher.example", "xn-- form"},
		{"api.example.com ", "character ' '"},
		{"127.1", "neither a host name nor an IP address"},
		{"2130706433", "neither a host name nor an IP address"},
		{"0x7f.1", "neither a host name nor an IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			_, err := ParsePolicy([]string{"ok.example.com", tt.entry})
			require.ErrorContains(t, err, tt.want)
			var e *EntryError
			require.True(t, errors.As(err, &e))
			require.Equal(t, 1, e.Index)
			require.Equal(t, tt.entry, e.Entry)
			require.Contains(t, err.Error(), `egress entry "`+tt.entry+`"`)
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		url     string
		want    string // "" when allowed, else part of the error
	}{
		{"exact", []string{"api.example.com"}, "https://api.example.com/v1", ""},
		{"exact any port", []string{"api.example.com"}, "http://api.example.com:8080/", ""},
		{"exact case and trailing dot", []string{"API.Example.com."}, "HTTPS://api.EXAMPLE.com./", ""},
		{"exact not the parent", []string{"api.example.com"}, "https://example.com/", "host example.com is not in tenant demo's egress allowlist"},
		{"exact not a subdomain", []string{"api.example.com"}, "https://x.api.example.com/", "host x.api.example.com is not"},
		{"exact not a suffix", []string{"api.example.com"}, "https://evilapi.example.com/", "host evilapi.example.com is not"},
		{"exact not a prefix", []string{"api.example.com"}, "https://api.example.com.evil.net/", "host api.example.com.evil.net is not"},
		{"user info is not the host", []string{"api.example.com"}, "https://api.example.com@evil.net/", "host evil.net is not"},
		{"wildcard subdomain", []string{"*.example.com"}, "https://a.example.com/", ""},
		{"wildcard deep subdomain", []string{"*.example.com"}, "https://a.b.example.com/", ""},
		{"wildcard not the domain", []string{"*.example.com"}, "https://example.com/", "host example.com is not"},
		{"wildcard not a suffix", []string{"*.example.com"}, "https://badexample.com/", "host badexample.com is not"},
		{"wildcard not a prefix", []string{"*.example.com"}, "https://a.example.com.evil.net/", "is not"},
		{"wildcard and domain", []string{"*.example.com", "example.com"}, "https://example.com/", ""},
		{"port matches", []string{"api.example.com:8443"}, "https://api.example.com:8443/", ""},
		{"port matches any scheme", []string{"api.example.com:8443"}, "http://api.example.com:8443/", ""},
		{"port default https", []string{"api.example.com:443"}, "https://api.example.com/", ""},
		{"port default http", []string{"api.example.com:443"}, "http://api.example.com/", "port 80 of host api.example.com is not in"},
		{"port differs", []string{"api.example.com:8443"}, "https://api.example.com/", "port 443 of host api.example.com is not in"},
		{"port on wildcard", []string{"*.example.com:8443"}, "https://a.example.com:8443/", ""},
		{"second entry with port", []string{"api.example.com:8443", "api.example.com:9443"}, "https://api.example.com:9443/", ""},
		{"ipv4 literal", []string{"203.0.113.7"}, "http://203.0.113.7:9000/", ""},
		{"ipv4 other", []string{"203.0.113.7"}, "http://203.0.113.8/", "host 203.0.113.8 is not"},
		{"ipv4 with port", []string{"203.0.113.7:8080"}, "http://203.0.113.7/", "port 80 of host 203.0.113.7"},
		{"ipv4 mapped in url", []string{"203.0.113.7"}, "http://[::ffff:203.0.113.7]/", ""},
		{"ipv6 literal", []string{"2001:db8::1"}, "http://[2001:db8::1]/", ""},
		{"ipv6 bracketed", []string{"[2001:db8::1]"}, "http://[2001:db8::1]/", ""},
		{"ipv6 non-canonical url", []string{"2001:db8::1"}, "http://[2001:0db8:0:0::0001]/", ""},
		{"ipv6 with port", []string{"[2001:db8::1]:8443"}, "https://[2001:db8::1]:8443/", ""},
		{"ipv6 port differs", []string{"[2001:db8::1]:8443"}, "https://[2001:db8::1]/", "port 443 of host 2001:db8::1"},
		{"ipv6 other", []string{"2001:db8::1"}, "http://[2001:db8::2]/", "host 2001:db8::2 is not"},
		{"ipv6 zone in url", []string{"fe80::1"}, "http://[fe80::1%25eth0]/", ""},
		{"cidr", []string{"10.1.2.0/24"}, "http://10.1.2.3:8080/", ""},
		{"cidr outside", []string{"10.1.2.0/24"}, "http://10.1.3.1/", "host 10.1.3.1 is not"},
		{"cidr ipv6", []string{"2001:db8::/32"}, "http://[2001:db8::abcd]/", ""},
		{"cidr is not a name", []string{"10.1.2.0/24"}, "http://internal.example.com/", "host internal.example.com is not"},
		{"scheme", []string{"api.example.com"}, "ftp://api.example.com/x", `scheme "ftp" of ftp://api.example.com/x is not allowed`},
		{"file", []string{"api.example.com"}, "file:///etc/passwd", `scheme "file"`},
		{"no host", []string{"api.example.com"}, "http:///x", "names no host"},
		{"empty policy", nil, "https://api.example.com/", "host api.example.com is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy(tt.entries)
			require.NoError(t, err)
			p.Tenant = "demo"
			u, err := url.Parse(tt.url)
			require.NoError(t, err)
			err = p.checkURL(u)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.True(t, agent.IsCode(err, agent.CodeInvalid))
		})
	}
}

func TestCheckURLHidesQuery(t *testing.T) {
	p, err := ParsePolicy(nil)
	require.NoError(t, err)
	u, err := url.Parse("gopher://user:pw@api.example.com/x?key=s3cret#frag")
	require.NoError(t, err)
	err = p.checkURL(u)
	require.EqualError(t, err, `scheme "gopher" of gopher://api.example.com/x is not allowed: use http or https`)
}

func TestPolicyAdmits(t *testing.T) {
	p, err := ParsePolicy([]string{"docs.example.com", "*.apis.example", "api.example:8443", "10.1.0.0/16"})
	require.NoError(t, err)
	for raw, want := range map[string]bool{
		"https://docs.example.com/openapi.json":   true,
		"https://DOCS.example.com./openapi.json":  true,
		"https://x.docs.example.com/openapi.json": false,
		"https://a.apis.example/o.yaml":           true,
		"https://apis.example/o.yaml":             false,
		"https://api.example:8443/o.json":         true,
		"https://api.example/o.json":              false,
		"http://10.1.2.3/o.json":                  true,
		"http://10.2.0.1/o.json":                  false,
		"ftp://docs.example.com/o.json":           false,
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		require.Equal(t, want, p.Admits(u), raw)
	}
}
