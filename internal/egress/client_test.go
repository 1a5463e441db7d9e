package egress_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
)

// fakeDNS answers lookups from a table, so that public-looking names can
// resolve to whatever a test needs.
type fakeDNS map[string][]string

func (f fakeDNS) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range f[strings.TrimSuffix(strings.ToLower(host), ".")] {
		a := netip.MustParseAddr(s)
		if network == "ip4" && !a.Unmap().Is4() || network == "ip6" && a.Unmap().Is4() {
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// server is a real HTTP server that counts the connections made to it.
type server struct {
	*httptest.Server
	port  string
	conns atomic.Int64
}

// serve starts a server listening on addr ("127.0.0.1:0" and the like);
// it skips the test where the address cannot be listened on.
func serve(t *testing.T, addr string, h http.HandlerFunc) *server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Listener.Close()
	s.Listener = l
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	_, s.port, err = net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return s
}

func hello(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }

// client builds an egress client for tenant demo, under an operator that
// opens every address, so that the tenant's entries decide; dns nil keeps
// the real resolver.
func client(t *testing.T, entries []string, dns fakeDNS, edit ...func(*egress.Policy)) *http.Client {
	t.Helper()
	p, err := egress.ParsePolicy(entries)
	require.NoError(t, err)
	p.Tenant = "demo"
	if dns != nil {
		p.Resolver = dns
	}
	for _, e := range edit {
		e(&p)
	}
	c := openEverything(t).Client(p)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func requireRefused(t *testing.T, err error, want string) {
	t.Helper()
	require.ErrorContains(t, err, want)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "code %s: %v", agent.ErrorCode(err), err)
}

func TestClientRefuses(t *testing.T) {
	s := serve(t, "127.0.0.1:0", hello)
	tests := []struct {
		name    string
		entries []string
		dns     fakeDNS
		url     string
		want    string
	}{
		{"loopback ip not listed", []string{"api.example.com"}, nil,
			"http://127.0.0.1:{port}/", "host 127.0.0.1 is not in tenant demo's egress allowlist"},
		{"localhost not listed", []string{"api.example.com"}, nil,
			"http://localhost:{port}/", "host localhost is not in tenant demo's egress allowlist"},
		{"localhost listed by name only", []string{"localhost"}, nil,
			"http://localhost:{port}/", "host localhost resolves to 127.0.0.1, a loopback address (127.0.0.0/8), which tenant demo's egress allowlist does not include"},
		{"name resolving to loopback", []string{"api.example.com"}, fakeDNS{"api.example.com": {"127.0.0.1"}},
			"http://api.example.com:{port}/", "host api.example.com resolves to 127.0.0.1, a loopback address"},
		{"name resolving to private", []string{"api.example.com"}, fakeDNS{"api.example.com": {"10.0.0.1"}},
			"http://api.example.com:{port}/", "host api.example.com resolves to 10.0.0.1, a private address (10.0.0.0/8)"},
		{"name resolving to metadata", []string{"*.example.com"}, fakeDNS{"api.example.com": {"169.254.169.254"}},
			"http://api.example.com/latest/meta-data/", "resolves to 169.254.169.254, a cloud metadata address"},
		{"metadata under a listed cidr", []string{"api.example.com", "169.254.0.0/16"}, fakeDNS{"api.example.com": {"169.254.169.254"}},
			"http://api.example.com/", "resolves to 169.254.169.254, a cloud metadata address"},
		{"loopback outside the listed cidr", []string{"api.example.com", "10.0.0.0/8"}, fakeDNS{"api.example.com": {"127.0.0.1"}},
			"http://api.example.com:{port}/", "resolves to 127.0.0.1, a loopback address"},
		{"name resolving to ipv6 loopback", []string{"api.example.com"}, fakeDNS{"api.example.com": {"::1"}},
			"http://api.example.com:{port}/", "resolves to ::1, a loopback address (::1/128)"},
		{"name resolving to mapped loopback", []string{"api.example.com"}, fakeDNS{"api.example.com": {"::ffff:127.0.0.1"}},
			"http://api.example.com:{port}/", "resolves to 127.0.0.1, a loopback address"},
		{"name resolving to ipv6 metadata", []string{"api.example.com"}, fakeDNS{"api.example.com": {"fd00:ec2::254"}},
			"http://api.example.com/", "resolves to fd00:ec2::254, a cloud metadata address"},
		{"name resolving to refused addresses only", []string{"api.example.com"}, fakeDNS{"api.example.com": {"10.0.0.1", "127.0.0.1"}},
			"http://api.example.com:{port}/", "resolves to 10.0.0.1, a private address"},
		{"other port", []string{"127.0.0.1:1"}, nil,
			"http://127.0.0.1:{port}/", "port {port} of host 127.0.0.1 is not in tenant demo's egress allowlist"},
		{"scheme", []string{"127.0.0.1"}, nil,
			"ftp://127.0.0.1:{port}/", `scheme "ftp" of ftp://127.0.0.1:{port}/ is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReplacer("{port}", s.port)
			before := s.conns.Load()
			_, err := get(client(t, tt.entries, tt.dns), r.Replace(tt.url))
			requireRefused(t, err, r.Replace(tt.want))
			require.Equal(t, before, s.conns.Load(), "a refused call must not connect")
		})
	}
}

func TestClientAllows(t *testing.T) {
	s := serve(t, "127.0.0.1:0", hello)
	tests := []struct {
		name    string
		entries []string
		dns     fakeDNS
		url     string
	}{
		{"ip entry", []string{"127.0.0.1"}, nil, "http://127.0.0.1:{port}/"},
		{"ip entry with port", []string{"127.0.0.1:{port}"}, nil, "http://127.0.0.1:{port}/"},
		{"cidr", []string{"127.0.0.0/8"}, nil, "http://127.0.0.1:{port}/"},
		{"localhost and cidr", []string{"localhost", "127.0.0.0/8"}, nil, "http://localhost:{port}/"},
		{"name and single-address cidr", []string{"api.example.com", "127.0.0.1/32"}, fakeDNS{"api.example.com": {"127.0.0.1"}},
			"http://api.example.com:{port}/"},
		{"name with port", []string{"api.example.com:{port}", "127.0.0.1/32"}, fakeDNS{"api.example.com": {"127.0.0.1"}},
			"http://api.example.com:{port}/"},
		{"wildcard", []string{"*.example.com", "127.0.0.0/8"}, fakeDNS{"a.b.example.com": {"127.0.0.1"}},
			"http://a.b.example.com:{port}/"},
		{"case and trailing dot", []string{"api.example.com", "127.0.0.1/32"}, fakeDNS{"api.example.com": {"127.0.0.1"}},
			"http://API.Example.COM.:{port}/"},
		{"mixed answers dial the allowed address only", []string{"api.example.com", "127.0.0.0/8"},
			fakeDNS{"api.example.com": {"10.0.0.1", "169.254.169.254", "::1", "127.0.0.1"}}, "http://api.example.com:{port}/"},
		{"mapped answer", []string{"api.example.com", "127.0.0.0/8"}, fakeDNS{"api.example.com": {"::ffff:127.0.0.1"}},
			"http://api.example.com:{port}/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReplacer("{port}", s.port)
			entries := make([]string, len(tt.entries))
			for i, e := range tt.entries {
				entries[i] = r.Replace(e)
			}
			body, err := get(client(t, entries, tt.dns), r.Replace(tt.url))
			require.NoError(t, err)
			require.Equal(t, "hello", body)
		})
	}
}

func TestClientIPv6(t *testing.T) {
	s := serve(t, "[::1]:0", hello)
	tests := []struct {
		name    string
		entries []string
		dns     fakeDNS
		url     string
		want    string // "" when allowed
	}{
		{"bare entry", []string{"::1"}, nil, "http://[::1]:{port}/", ""},
		{"bracketed entry with port", []string{"[::1]:{port}"}, nil, "http://[::1]:{port}/", ""},
		{"cidr", []string{"::1/128"}, nil, "http://[::1]:{port}/", ""},
		{"name and cidr", []string{"api.example.com", "::1/128"}, fakeDNS{"api.example.com": {"::1"}}, "http://api.example.com:{port}/", ""},
		{"not listed", []string{"api.example.com"}, nil, "http://[::1]:{port}/", "host ::1 is not in tenant demo's egress allowlist"},
		{"other port", []string{"[::1]:1"}, nil, "http://[::1]:{port}/", "port {port} of host ::1 is not in"},
		{"ipv4 cidr does not cover it", []string{"api.example.com", "127.0.0.0/8"}, fakeDNS{"api.example.com": {"::1"}},
			"http://api.example.com:{port}/", "resolves to ::1, a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReplacer("{port}", s.port)
			entries := make([]string, len(tt.entries))
			for i, e := range tt.entries {
				entries[i] = r.Replace(e)
			}
			body, err := get(client(t, entries, tt.dns), r.Replace(tt.url))
			if tt.want != "" {
				requireRefused(t, err, r.Replace(tt.want))
				return
			}
			require.NoError(t, err)
			require.Equal(t, "hello", body)
		})
	}
}

func TestClientRedirects(t *testing.T) {
	// target listens on 127.0.0.1, which no entry allows; origin listens on
	// 127.0.0.2, which the policy allows, and redirects where ?to= says.
	target := serve(t, "127.0.0.1:0", hello)
	origin := serve(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		io.WriteString(w, "final")
	})
	dns := fakeDNS{
		"api.example.com":      {"127.0.0.2"},
		"internal.example.com": {"127.0.0.1"},
	}
	entries := []string{"api.example.com", "internal.example.com", "127.0.0.2/32"}
	tests := []struct {
		name string
		to   string
		want string // "" when allowed
	}{
		{"same server", "/final", ""},
		{"host not listed", "http://evil.example.net:{target}/", "redirect to http://evil.example.net:{target}/: host evil.example.net is not in tenant demo's egress allowlist"},
		{"loopback ip", "http://127.0.0.1:{target}/", "redirect to http://127.0.0.1:{target}/: host 127.0.0.1 is not in tenant demo's egress allowlist"},
		{"localhost", "http://localhost:{target}/", "host localhost is not in"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "host 169.254.169.254 is not in"},
		{"listed name resolving to loopback", "http://internal.example.com:{target}/", "host internal.example.com resolves to 127.0.0.1, a loopback address"},
		{"other scheme", "file:///etc/passwd", `redirect to file:///etc/passwd: scheme "file"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReplacer("{target}", target.port)
			u := "http://api.example.com:" + origin.port + "/?to=" + url.QueryEscape(r.Replace(tt.to))
			body, err := get(client(t, entries, dns), u)
			if tt.want != "" {
				requireRefused(t, err, r.Replace(tt.want))
				require.Zero(t, target.conns.Load(), "a refused redirect must not connect")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "final", body)
		})
	}
}

func TestClientRedirectLimit(t *testing.T) {
	// /hop/n redirects to /hop/n-1; /hop/0 answers.
	var requests atomic.Int64
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if err != nil || n == 0 {
			io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	tests := []struct {
		name     string
		max      int
		hops     int
		want     string // "" when allowed
		requests int64
	}{
		{"default allows 5", 0, 5, "", 6},
		{"default stops the 6th", 0, 6, "too many redirects: tenant demo's egress policy allows 5", 6},
		{"2 allows 2", 2, 2, "", 3},
		{"2 stops the 3rd", 2, 3, "too many redirects: tenant demo's egress policy allows 2", 3},
		{"none", -1, 1, "too many redirects: tenant demo's egress policy allows 0", 1},
		{"none needed", -1, 0, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests.Store(0)
			c := client(t, []string{"127.0.0.1"}, nil, func(p *egress.Policy) { p.MaxRedirects = tt.max })
			body, err := get(c, fmt.Sprintf("%s/hop/%d", s.URL, tt.hops))
			require.Equal(t, tt.requests, requests.Load())
			if tt.want != "" {
				requireRefused(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "done", body)
		})
	}
}

func TestClientResponseCap(t *testing.T) {
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		kind, size, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		n, err := strconv.Atoi(size)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body := strings.Repeat("x", n)
		switch kind {
		case "fixed":
			w.Header().Set("Content-Length", size)
			io.WriteString(w, body)
		case "chunked": // no Content-Length: the cap must hold while reading
			for range n / 100 {
				io.WriteString(w, body[:100])
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, body[:n%100])
		case "gzip": // small on the wire, large once the transport unpacks it
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				http.Error(w, "gzip not accepted", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			z := gzip.NewWriter(w)
			io.WriteString(z, body)
			z.Close()
		}
	})
	tests := []struct {
		name string
		max  int64
		path string
		want string // "" when allowed
	}{
		{"fixed at the cap", 1000, "/fixed/1000", ""},
		{"fixed over the cap", 1000, "/fixed/1001", "response of {url}/fixed/1001 is larger than 1000 bytes"},
		{"chunked at the cap", 1000, "/chunked/1000", ""},
		{"chunked over the cap", 1000, "/chunked/1001", "response of {url}/chunked/1001 is larger than 1000 bytes"},
		{"chunked far over the cap", 1000, "/chunked/100000", "is larger than 1000 bytes"},
		{"gzip at the cap", 1000, "/gzip/1000", ""},
		{"gzip over the cap", 1000, "/gzip/1000000", "response of {url}/gzip/1000000 is larger than 1000 bytes"},
		{"default cap", 0, "/fixed/10485761", "is larger than 10485760 bytes"},
		{"empty", 1000, "/fixed/0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client(t, []string{"127.0.0.1"}, nil, func(p *egress.Policy) { p.MaxResponseBytes = tt.max })
			body, err := get(c, s.URL+tt.path)
			if tt.want != "" {
				requireRefused(t, err, strings.ReplaceAll(tt.want, "{url}", s.URL))
				return
			}
			require.NoError(t, err)
			_, size, _ := strings.Cut(strings.TrimPrefix(tt.path, "/"), "/")
			require.Equal(t, size, strconv.Itoa(len(body)))
		})
	}
}

// TestClientTooLargeError: a response over the cap is refused with a
// *TooLargeError that says which cap.
func TestClientTooLargeError(t *testing.T) {
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 3000)) })
	c := client(t, []string{"127.0.0.1"}, nil, func(p *egress.Policy) { p.MaxResponseBytes = 1000 })
	_, err := get(c, s.URL+"/doc")
	requireRefused(t, err, "response of "+s.URL+"/doc is larger than 1000 bytes")
	var big *egress.TooLargeError
	require.True(t, errors.As(err, &big), "%v", err)
	require.Equal(t, &egress.TooLargeError{URL: s.URL + "/doc", Limit: 1000}, big)
}

// TestClientStreamedCap: a request whose body is streamed to storage is
// capped at the limit its caller gives, not the policy's cap for bodies
// held in memory.
func TestClientStreamedCap(t *testing.T) {
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		for range n / 1000 {
			io.WriteString(w, strings.Repeat("x", 1000))
		}
	})
	c := client(t, []string{"127.0.0.1"}, nil, func(p *egress.Policy) { p.MaxResponseBytes = 1000 })
	for _, tc := range []struct {
		name  string
		limit int64
		size  int
		want  string
	}{
		{"within the stream's cap", 50_000, 20_000, ""},
		{"over the stream's cap", 10_000, 20_000, "is larger than 10000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(egress.Streamed(t.Context(), tc.limit), http.MethodGet, fmt.Sprintf("%s/%d", s.URL, tc.size), nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			if err == nil {
				var n int64
				n, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if tc.want == "" {
					require.EqualValues(t, tc.size, n)
				}
			}
			if tc.want != "" {
				requireRefused(t, err, tc.want)
				return
			}
			require.NoError(t, err)
		})
	}
	_, err := get(c, s.URL+"/20000")
	requireRefused(t, err, "is larger than 1000 bytes")
}

func TestClientTimeout(t *testing.T) {
	release := make(chan struct{})
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	for _, path := range []string{"/headers", "/body"} {
		t.Run(path, func(t *testing.T) {
			c := client(t, []string{"127.0.0.1"}, nil, func(p *egress.Policy) { p.Timeout = 200 * time.Millisecond })
			start := time.Now()
			_, err := get(c, s.URL+path)
			var ne net.Error
			require.True(t, errors.As(err, &ne), "%T: %v", err, err)
			require.True(t, ne.Timeout(), "%v", err)
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

func TestClientIgnoresProxyEnvironment(t *testing.T) {
	direct := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "direct") })
	proxy := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "proxied") })
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	u := "http://api.example.com:" + direct.port + "/"

	// A client that honours the environment goes through the proxy, so the
	// setting is live.
	body, err := get(&http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}, u)
	require.NoError(t, err)
	require.Equal(t, "proxied", body)

	body, err = get(client(t, []string{"api.example.com", "127.0.0.1/32"}, fakeDNS{"api.example.com": {"127.0.0.1"}}), u)
	require.NoError(t, err)
	require.Equal(t, "direct", body)
}

// rebindingDNS answers first with one address, then always with another.
type rebindingDNS struct {
	mu            sync.Mutex
	first, others netip.Addr
	lookups       int
}

func (d *rebindingDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if d.lookups == 1 {
		return []netip.Addr{d.first}, nil
	}
	return []netip.Addr{d.others}, nil
}

func TestClientRebinding(t *testing.T) {
	s := serve(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // so that the next request dials again
		hello(w, r)
	})
	dns := &rebindingDNS{first: netip.MustParseAddr("127.0.0.2"), others: netip.MustParseAddr("127.0.0.1")}
	c := client(t, []string{"api.example.com", "127.0.0.2/32"}, nil, func(p *egress.Policy) { p.Resolver = dns })
	u := "http://api.example.com:" + s.port + "/"

	body, err := get(c, u)
	require.NoError(t, err)
	require.Equal(t, "hello", body)

	// The next connection resolves again and is checked again.
	_, err = get(c, u)
	requireRefused(t, err, "host api.example.com resolves to 127.0.0.1, a loopback address")
	require.Equal(t, 2, dns.lookups)
}

// TestClientReusesConnections: calls in flight at once each hold a
// connection to the host; the next rounds take them again instead of
// opening new ones.
func TestClientReusesConnections(t *testing.T) {
	const calls = 16
	s := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, "hello")
	})
	c := client(t, []string{"127.0.0.1"}, nil)
	round := func() {
		var g errgroup.Group
		for range calls {
			g.Go(func() error {
				_, err := get(c, "http://127.0.0.1:"+s.port+"/")
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	round()
	first := s.conns.Load()
	require.LessOrEqual(t, first, int64(calls))
	round()
	round()
	require.Equal(t, first, s.conns.Load(), "later rounds open no new connections")
}
