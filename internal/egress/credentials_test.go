package egress_test

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
)

// apiKey is the credential's value in these tests, the value of env:KEY.
const apiKey = "key-7c1d9e2f0a3b"

// recorder is a real server that records every request it gets. /echo
// answers with the request's URL and headers (and the API key in a
// response header, as some APIs do, gzipped when asked); /to?u=URL&code=N
// redirects to URL.
type recorder struct {
	*server
	name string // the host name tests call it by
	mu   sync.Mutex
	got  []*http.Request
}

func record(t *testing.T, addr, name string) *recorder {
	t.Helper()
	rec := &recorder{name: name}
	rec.server = serve(t, addr, func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.got = append(rec.got, r.Clone(r.Context()))
		rec.mu.Unlock()
		if r.URL.Path == "/bad-location" {
			w.Header().Set("Location", "http://[bad")
			w.WriteHeader(http.StatusFound)
			return
		}
		if u := r.URL.Query().Get("u"); r.URL.Path == "/to" {
			code := http.StatusFound
			if r.URL.Query().Get("code") == "307" {
				code = http.StatusTemporaryRedirect
			}
			http.Redirect(w, r, u, code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		var out io.Writer = w
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		_ = json.NewEncoder(out).Encode(map[string]any{"url": r.URL.String(), "header": r.Header})
	})
	return rec
}

// url is a URL of the server by its name.
func (r *recorder) url(path string) string { return "http://" + r.name + ":" + r.port + path }

func (r *recorder) host() string { return r.name + ":" + r.port }

// requests are what the server got so far.
func (r *recorder) requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.got...)
}

// sawKey reports whether any request carried apiKey, in any form, in its
// URL or headers.
func (r *recorder) sawKey() bool {
	for _, req := range r.requests() {
		all := req.URL.String()
		for name, vs := range req.Header {
			all += "\n" + name + ": " + strings.Join(vs, ", ")
		}
		for _, f := range keyForms() {
			if strings.Contains(all, f) {
				return true
			}
		}
	}
	return false
}

// keyForms are the ways a request or an answer may hold apiKey.
func keyForms() []string {
	return []string{apiKey, url.QueryEscape(apiKey), base64.StdEncoding.EncodeToString([]byte("ada:" + apiKey))}
}

func requireNoKey(t *testing.T, s string) {
	t.Helper()
	for _, f := range keyForms() {
		require.NotContains(t, s, f)
	}
}

// twoHosts are api.example.com on 127.0.0.1 and other.example.net on
// 127.0.0.2, both in the allowlist, and the egress client of a tenant that
// may reach them.
func twoHosts(t *testing.T) (api, other *recorder, base *http.Client) {
	t.Helper()
	api = record(t, "127.0.0.1:0", "api.example.com")
	other = record(t, "127.0.0.2:0", "other.example.net")
	dns := fakeDNS{"api.example.com": {"127.0.0.1"}, "other.example.net": {"127.0.0.2"}}
	return api, other, client(t, []string{api.host(), other.host(), "127.0.0.1/32", "127.0.0.2/32"}, dns)
}

func envSecrets(env map[string]string) egress.Secrets {
	return secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func credentialed(t *testing.T, base *http.Client, list ...egress.Credential) *http.Client {
	t.Helper()
	creds, err := egress.NewCredentials(envSecrets(map[string]string{"KEY": apiKey, "LOGIN": "ada:" + apiKey}), list)
	require.NoError(t, err)
	return creds.Client(base)
}

func body(t *testing.T, resp *http.Response, err error) string {
	t.Helper()
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestCredentialsGoToTheirOwnHost: a credential is added to the requests
// to its host, in its place, and to no other; an answer that echoes it
// shows its placeholder.
func TestCredentialsGoToTheirOwnHost(t *testing.T) {
	api, other, base := twoHosts(t)
	tests := []struct {
		name  string
		cred  egress.Credential
		check func(t *testing.T, r *http.Request)
	}{
		{"header", egress.Credential{Name: "X-Api-Key", Secret: "env:KEY"}, func(t *testing.T, r *http.Request) {
			require.Equal(t, apiKey, r.Header.Get("X-Api-Key"))
		}},
		{"header with a prefix", egress.Credential{In: egress.InHeader, Name: "Authorization", Prefix: "Bearer ", Secret: "env:KEY"}, func(t *testing.T, r *http.Request) {
			require.Equal(t, "Bearer "+apiKey, r.Header.Get("Authorization"))
		}},
		{"query", egress.Credential{In: egress.InQuery, Name: "api_key", Secret: "env:KEY"}, func(t *testing.T, r *http.Request) {
			require.Equal(t, apiKey, r.URL.Query().Get("api_key"))
			require.Equal(t, "1", r.URL.Query().Get("page"), "the request's own query is kept")
		}},
		{"cookie", egress.Credential{In: egress.InCookie, Name: "sid", Secret: "env:KEY"}, func(t *testing.T, r *http.Request) {
			c, err := r.Cookie("sid")
			require.NoError(t, err)
			require.Equal(t, apiKey, c.Value)
		}},
		{"basic", egress.Credential{In: egress.InBasic, Secret: "env:LOGIN"}, func(t *testing.T, r *http.Request) {
			user, pass, ok := r.BasicAuth()
			require.True(t, ok)
			require.Equal(t, "ada", user)
			require.Equal(t, apiKey, pass)
		}},
	}
	for _, tt := range tests {
		for _, host := range []string{api.host(), api.name} { // that port, any port
			t.Run(tt.name+" for "+host, func(t *testing.T) {
				tt.cred.Host = host
				c := credentialed(t, base, tt.cred)
				req, err := http.NewRequest(http.MethodGet, api.url("/echo?page=1"), nil)
				require.NoError(t, err)
				req.Header.Set("Accept", "application/json")
				resp, err := c.Do(req)
				echo := body(t, resp, err)
				got := api.requests()
				tt.check(t, got[len(got)-1])
				require.Equal(t, "page=1", req.URL.RawQuery, "the tool's request is not changed")
				require.Equal(t, http.Header{"Accept": {"application/json"}}, req.Header, "the tool's request is not changed")
				requireNoKey(t, echo)
				require.Contains(t, echo, "[secret env:")
				requireNoKey(t, resp.Header.Get("X-Echo"))

				before := len(other.requests())
				resp, err = c.Get(other.url("/echo"))
				echo = body(t, resp, err)
				require.Len(t, other.requests(), before+1)
				require.False(t, other.sawKey(), "another host gets no credential")
				require.NotContains(t, echo, "[secret")
			})
		}
	}

	// A body compressed at the caller's request is decompressed, then
	// cleaned.
	c := credentialed(t, base, egress.Credential{Host: api.host(), Name: "X-Api-Key", Secret: "env:KEY"})
	req, err := http.NewRequest(http.MethodGet, api.url("/echo"), nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := c.Do(req)
	echo := body(t, resp, err)
	requireNoKey(t, echo)
	require.Contains(t, echo, `"X-Api-Key":["[secret env:KEY]"]`)
}

// TestCredentialsRedirects: a redirect from or to a host with a
// credential, to or from another host, is not followed; one within the
// host is, with the credential.
func TestCredentialsRedirects(t *testing.T) {
	api, other, base := twoHosts(t)
	creds := []egress.Credential{
		{Host: api.host(), Name: "X-Api-Key", Secret: "env:KEY"},
		{Host: api.host(), In: egress.InQuery, Name: "api_key", Secret: "env:KEY"},
	}
	tests := []struct {
		name, method, url string
		want              string // the refusal; "" when followed
		apiGot, otherGot  int    // requests each host gets
	}{
		{"from the host to another", http.MethodGet, api.url("/to?u=" + url.QueryEscape(other.url("/steal?x=1"))),
			"302 Found redirects from " + api.url("/to") + " to " + other.url("/steal") + ", another host: not followed, since credentials go to their own host only", 1, 0},
		{"a POST from the host to another", http.MethodPost, api.url("/to?code=307&u=" + url.QueryEscape(other.url("/steal"))),
			"307 Temporary Redirect redirects from " + api.url("/to") + " to " + other.url("/steal"), 1, 0},
		{"from another host to the host", http.MethodGet, other.url("/to?u=" + url.QueryEscape(api.url("/echo"))),
			"302 Found redirects from " + other.url("/to") + " to " + api.url("/echo"), 0, 1},
		{"from the host to another port of it", http.MethodGet, api.url("/to?u=" + url.QueryEscape("http://api.example.com:1/echo")),
			"to http://api.example.com:1/echo, another host", 1, 0},
		{"within the host", http.MethodGet, api.url("/to?u=/echo"), "", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apiBefore, otherBefore := len(api.requests()), len(other.requests())
			req, err := http.NewRequest(tt.method, tt.url, strings.NewReader(`{"a":1}`))
			require.NoError(t, err)
			resp, err := credentialed(t, base, creds...).Do(req)
			got := api.requests()[apiBefore:]
			require.Len(t, got, tt.apiGot)
			require.Len(t, other.requests(), otherBefore+tt.otherGot)
			if tt.want == "" {
				echo := body(t, resp, err)
				require.Equal(t, apiKey, got[1].Header.Get("X-Api-Key"), "the credential goes again to its own host")
				requireNoKey(t, echo)
				return
			}
			require.ErrorContains(t, err, tt.want)
			requireNoKey(t, err.Error())
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			var re *egress.RedirectError
			require.ErrorAs(t, err, &re)
			require.False(t, other.sawKey(), "the other host sees no credential")
		})
	}
}

// TestCredentialsNotInErrors: http.Client names the URL of the request
// that got an answer in its errors; that is the caller's, without the
// credential in its query.
func TestCredentialsNotInErrors(t *testing.T) {
	api, _, base := twoHosts(t)
	c := credentialed(t, base, egress.Credential{Host: api.host(), In: egress.InQuery, Name: "api_key", Secret: "env:KEY"})
	_, err := c.Get(api.url("/bad-location?page=1"))
	require.ErrorContains(t, err, `Get "`+api.url("/bad-location?page=1")+`": failed to parse Location header "http://[bad"`)
	requireNoKey(t, err.Error())
	require.True(t, api.sawKey(), "the API got its key")
}

// TestRedirectKeepsHeadersHome: a redirect to another origin carries none
// of the tool's headers but a few harmless ones, credentials or not; Go
// alone would forward custom headers everywhere, and Authorization to a
// subdomain.
func TestRedirectKeepsHeadersHome(t *testing.T) {
	first := record(t, "127.0.0.2:0", "example.net")
	second := record(t, "127.0.0.2:0", "sub.example.net")
	dns := fakeDNS{"example.net": {"127.0.0.2"}, "sub.example.net": {"127.0.0.2"}}
	c := client(t, []string{first.host(), second.host(), "127.0.0.2/32"}, dns)
	for _, c := range []*http.Client{c, credentialed(t, c)} {
		req, err := http.NewRequest(http.MethodGet, first.url("/to?u="+url.QueryEscape(second.url("/echo"))), nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("X-Tool-Header", "from the config")
		req.Header.Set("Authorization", "Bearer set-by-the-tool")
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := c.Do(req)
		body(t, resp, err)
		got := second.requests()
		last := got[len(got)-1]
		require.Equal(t, "application/json", last.Header.Get("Accept"))
		for _, h := range []string{"X-Tool-Header", "Authorization", "Idempotency-Key", "Referer"} {
			require.Empty(t, last.Header.Get(h), h)
		}
	}

	// Within one origin they go along.
	req, err := http.NewRequest(http.MethodGet, first.url("/to?u=/echo"), nil)
	require.NoError(t, err)
	req.Header.Set("X-Tool-Header", "from the config")
	resp, err := c.Do(req)
	body(t, resp, err)
	got := first.requests()
	require.Equal(t, "from the config", got[len(got)-1].Header.Get("X-Tool-Header"))
}

// TestCredentialsResolve: a secret that is not set fails the call before
// anything is sent, naming the reference.
func TestCredentialsResolve(t *testing.T) {
	api, _, base := twoHosts(t)
	creds, err := egress.NewCredentials(envSecrets(nil), []egress.Credential{{Host: api.host(), Name: "X-Api-Key", Secret: "env:UNSET"}})
	require.NoError(t, err)
	err = creds.Resolve(t.Context())
	require.ErrorIs(t, err, secrets.ErrNotSet)
	require.ErrorContains(t, err, "env:UNSET")
	_, err = creds.Client(base).Get(api.url("/echo"))
	require.ErrorIs(t, err, secrets.ErrNotSet)
	require.Empty(t, api.requests())
	require.True(t, creds.Carries(&url.URL{Scheme: "http", Host: api.host()}))
	require.False(t, creds.Carries(&url.URL{Scheme: "http", Host: "api.example.com:1"}))
}

func TestCredentialCheck(t *testing.T) {
	for _, tt := range []struct {
		cred egress.Credential
		want string // "" when valid
	}{
		{egress.Credential{Host: "api.example.com", Name: "X-Api-Key", Secret: "env:K"}, ""},
		{egress.Credential{Host: "API.example.com.:8443", In: egress.InQuery, Name: "key", Secret: "env:K"}, ""},
		{egress.Credential{Host: "[2001:db8::1]:443", In: egress.InBasic, Secret: "env:K"}, ""},
		{egress.Credential{Host: "2001:db8::1", In: egress.InCookie, Name: "sid", Secret: "env:K"}, ""},
		{egress.Credential{Host: "", Name: "X", Secret: "env:K"}, "empty: write host or host:port"},
		{egress.Credential{Host: "https://api.example.com", Name: "X", Secret: "env:K"}, "not a URL"},
		{egress.Credential{Host: "api.example.com:0", Name: "X", Secret: "env:K"}, `port "0" is not in 1..65535`},
		{egress.Credential{Host: "api.example.com:http", Name: "X", Secret: "env:K"}, `port "http"`},
		{egress.Credential{Host: "[::1", Name: "X", Secret: "env:K"}, "write host or host:port"},
		{egress.Credential{Host: "a", Name: "Bad Header", Secret: "env:K"}, `"Bad Header" is not a header name`},
		{egress.Credential{Host: "a", In: egress.InQuery, Secret: "env:K"}, "the query parameter needs a name"},
		{egress.Credential{Host: "a", In: egress.InBasic, Name: "x", Secret: "env:K"}, "basic authentication takes no name or prefix"},
		{egress.Credential{Host: "a", In: "body", Name: "x", Secret: "env:K"}, `in "body": want header, query, cookie or basic`},
		{egress.Credential{Host: "a", Name: "X", Prefix: "Bearer\r\n", Secret: "env:K"}, "line break"},
		{egress.Credential{Host: "a", Name: "X", Secret: "sk-live-123"}, "not a secret reference"},
	} {
		err := tt.cred.Check()
		if tt.want == "" {
			require.NoError(t, err, "%+v", tt.cred)
			continue
		}
		require.ErrorContains(t, err, tt.want, "%+v", tt.cred)
		_, err = egress.NewCredentials(envSecrets(nil), []egress.Credential{tt.cred})
		require.ErrorContains(t, err, tt.want)
	}
}

// FuzzCredential: any credential a catalog may give is checked or refused
// with a message, never a panic; a valid one goes to its own host only.
func FuzzCredential(f *testing.F) {
	for _, s := range [][3]string{
		{"api.example.com", "header", "X-Api-Key"}, {"API.example.com.:8443", "query", "key"}, {"[2001:db8::1]:443", "basic", ""},
		{"2001:db8::1", "cookie", "sid"}, {"https://a/x", "header", "X"}, {"a:0", "", "X"}, {"[::1", "header", "X"}, {"", "", ""},
	} {
		f.Add(s[0], s[1], s[2], "Bearer ")
	}
	f.Fuzz(func(t *testing.T, host, in, name, prefix string) {
		c := egress.Credential{Host: host, In: egress.Place(in), Name: name, Prefix: prefix, Secret: "env:KEY"}
		creds, err := egress.NewCredentials(envSecrets(map[string]string{"KEY": apiKey}), []egress.Credential{c})
		if err != nil {
			require.NotEmpty(t, err.Error())
			require.Error(t, c.Check())
			return
		}
		require.NoError(t, c.Check())
		if !strings.Contains(strings.ToLower(host), "elsewhere") {
			require.False(t, creds.Carries(&url.URL{Scheme: "https", Host: "elsewhere.example.org"}), "host %q", host)
		}
	})
}

// TestBasicPasswordEchoed is finding 2 of the fourth trust review at the
// egress client: an API that decodes a basic login and echoes the
// password alone (as it is, upper-cased, in hex, in base64 after a
// prefix) shows the login's placeholder instead, and the call's secrets
// (secrets.Seen, which the tool registry cleans a call's output of) hold
// the password on its own; the user name is no secret and is left. A
// login whose password, or whose user where the password is empty, is
// shorter than secrets.MinBytes is refused before anything is sent.
func TestBasicPasswordEchoed(t *testing.T) {
	const pass = "Lov3lace-Analytic-Engine"
	var calls int
	var mu sync.Mutex
	api := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		user, pw, _ := r.BasicAuth()
		w.Header().Set("X-Password", pw)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"user": user, "password": pw, "upper": strings.ToUpper(pw), "hex": hex.EncodeToString([]byte(pw)),
			"tagged": base64.StdEncoding.EncodeToString([]byte("pw=" + pw)),
			"first":  pw[:len(pw)/2], "second": pw[len(pw)/2:],
		})
	})
	base := client(t, []string{"127.0.0.1/32"}, nil)
	env := map[string]string{"LOGIN": "ada:" + pass, "SHORT": "ada:admin1", "USERKEY": "sk_test_51Habc0123:", "SHORTUSER": "abcdefg:",
		"HEADER": base64.StdEncoding.EncodeToString([]byte("ada:" + pass))}
	call := func(t *testing.T, ref string) (string, http.Header, *secrets.Seen, error) {
		cred := egress.Credential{Host: "127.0.0.1:" + api.port, In: egress.InBasic, Secret: ref}
		if ref == "env:HEADER" { // a login as an MCP server's headers give it
			cred = egress.Credential{Host: cred.Host, In: egress.InHeader, Name: "Authorization", Prefix: "Basic ", Secret: ref}
		}
		creds, err := egress.NewCredentials(envSecrets(env), []egress.Credential{cred})
		require.NoError(t, err)
		ctx, seen := secrets.WithSeen(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+api.port+"/who", nil)
		require.NoError(t, err)
		resp, err := creds.Client(base).Do(req)
		if err != nil {
			return "", nil, seen, err
		}
		return body(t, resp, nil), resp.Header, seen, nil
	}

	for _, ref := range []string{"env:LOGIN", "env:HEADER"} {
		echo, header, seen, err := call(t, ref)
		require.NoError(t, err)
		var got map[string]string
		require.NoError(t, json.Unmarshal([]byte(echo), &got), echo)
		require.Equal(t, "ada", got["user"], "the user name is no secret")
		for _, field := range []string{"password", "upper", "hex", "tagged", "first", "second"} {
			require.Contains(t, got[field], "[secret "+ref+"]", field)
		}
		require.NotContains(t, strings.ToLower(echo), strings.ToLower(pass))
		require.Equal(t, "[secret "+ref+"]", header.Get("X-Password"))
		var values []string
		for _, s := range seen.Secrets() {
			values = append(values, s.Reveal())
		}
		require.Contains(t, values, pass, "the call's output is cleaned of the password on its own")
	}

	// A key sent as the user, with an empty password, is the part.
	echo, _, seen, err := call(t, "env:USERKEY")
	require.NoError(t, err)
	require.Contains(t, echo, `"user":"[secret env:USERKEY]"`)
	require.Len(t, seen.Secrets(), 1, "the value and its user are one key")

	mu.Lock()
	before := calls
	mu.Unlock()
	for _, ref := range []string{"env:SHORT", "env:SHORTUSER"} {
		_, _, _, err = call(t, ref)
		require.ErrorIs(t, err, secrets.ErrTooShort, ref)
		require.ErrorContains(t, err, "secret "+ref+": the ")
		require.NotContains(t, err.Error(), "admin1")
		require.NotContains(t, err.Error(), "abcdefg")
	}
	mu.Lock()
	require.Equal(t, before, calls, "nothing is sent with a login that short")
	mu.Unlock()
}
