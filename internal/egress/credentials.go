package egress

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Place is where a Credential goes in a request.
type Place string

// Places of a credential.
const (
	InHeader Place = "header" // the header Name: Prefix + value
	InQuery  Place = "query"  // the query parameter Name
	InCookie Place = "cookie" // the cookie Name
	InBasic  Place = "basic"  // HTTP basic authentication; the value is user:password
)

// Credential is a secret that goes with the requests to one host. Tools
// never put a secret in a request themselves: they describe it here, and
// Credentials adds it to a request whose host is the credential's own, on
// the way out, so that it is in no request object a tool, an error message
// or a redirect can see.
type Credential struct {
	// Host is where the credential goes: "api.example.com" (any port) or
	// "api.example.com:8443" (that port only; a URL without a port has
	// its scheme's). An IPv6 address is written in brackets when a port
	// follows: "[2001:db8::1]:8443".
	Host string
	// In is where the value goes. Default: InHeader.
	In Place
	// Name is the header, query parameter or cookie; none for InBasic.
	Name string
	// Prefix goes before the value in a header: "Bearer ".
	Prefix string
	// Secret is the value's reference, e.g. env:API_KEY, resolved for
	// each request that carries it.
	Secret string
}

// Secrets resolves secret references (internal/secrets.Resolver).
type Secrets interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

var tokenRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// Check checks a credential's form, without resolving its secret: tools
// call it when their config is loaded.
func (c Credential) Check() error {
	if _, _, err := parseCredentialHost(c.Host); err != nil {
		return fmt.Errorf("host %q: %w", c.Host, err)
	}
	switch c.In {
	case "", InHeader, InCookie:
		if !tokenRE.MatchString(c.Name) {
			return fmt.Errorf("%q is not a %s name", c.Name, cmp.Or(string(c.In), "header"))
		}
	case InQuery:
		if c.Name == "" {
			return errors.New("the query parameter needs a name")
		}
	case InBasic:
		if c.Name != "" || c.Prefix != "" {
			return errors.New("basic authentication takes no name or prefix")
		}
	default:
		return fmt.Errorf("in %q: want header, query, cookie or basic", c.In)
	}
	if strings.ContainsAny(c.Prefix, "\r\n\x00") {
		return errors.New("the prefix holds a line break")
	}
	return secrets.ValidateRef(c.Secret)
}

// parseCredentialHost reads host or host:port; port is "" for any port.
func parseCredentialHost(s string) (host, port string, err error) {
	switch {
	case s == "":
		return "", "", errors.New("empty: write host or host:port")
	case strings.ContainsAny(s, "/@?# "):
		return "", "", errors.New("write host or host:port, not a URL")
	}
	host = s
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if h, p, err := net.SplitHostPort(s); err == nil {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return "", "", fmt.Errorf("port %q is not in 1..65535", p)
			}
			host, port = h, p
		} else if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
			return "", "", errors.New("write host or host:port")
		} else {
			host = s[1 : len(s)-1]
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", "", errors.New("no host")
	}
	return host, port, nil
}

// origin is where a URL leads: scheme, host and port (the scheme's default
// when the URL names none).
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "https":
			o.port = "443"
		case "http":
			o.port = "80"
		}
	}
	return o
}

// HostPort is u's host and port, the scheme's default port when u names
// none: as a Credential's Host, it names exactly u's host and port.
func HostPort(u *url.URL) string {
	o := originOf(u)
	return net.JoinHostPort(o.host, o.port)
}

// credential is a checked Credential.
type credential struct {
	Credential
	host, port string
}

func (c credential) matches(o origin) bool {
	return c.host == o.host && (c.port == "" || c.port == o.port)
}

// Credentials are one tool's credentials, for one call or one session.
// Client gives the tool a client that adds each credential to the
// requests to its host, and to no other:
//
//   - A credential's secret is resolved for each request that carries it
//     (through the tool registry's secrets.Recording resolver, so that the
//     call's output is cleaned of it too), and added to a copy of the
//     request, never to the tool's.
//   - A redirect from or to a host that has a credential, to or from
//     another origin (scheme, host or port), is not followed: it fails
//     with a *RedirectError. Refusing, rather than following without the
//     credential, is the rule because a request that carried a secret is
//     all the far side's to echo: the Location it answers with and the
//     Referer Go would send may hold the secret, or what it gave access
//     to; and a redirect into a host with a credential would use the
//     secret for a request the tool (and whoever approved the call) never
//     made to that host. Redirects within one origin are followed, the
//     credential added again. openapi_action, execute_pipeline,
//     composite_pipeline and mcp all follow this one rule.
//   - Whatever a cross-origin redirect does carry is stripped of the
//     original request's headers (see the egress client's redirect rule).
//   - Every answer, body and headers, is cleaned of every value resolved
//     so far (Redactor): an API that echoes the key it was sent gives the
//     tool "[secret env:NAME]" instead, before any of it is parsed,
//     cached, stored or logged.
//
// Safe for concurrent use.
type Credentials struct {
	list    []credential
	secrets Secrets

	mu   sync.Mutex
	sent []secrets.Secret // every value resolved, to clean answers of
	red  *Redactor        // of sent
}

// NewCredentials checks list and returns credentials that resolve their
// secrets with r.
func NewCredentials(r Secrets, list []Credential) (*Credentials, error) {
	c := &Credentials{secrets: r}
	for i, cr := range list {
		if err := cr.Check(); err != nil {
			return nil, fmt.Errorf("credential %d: %w", i, err)
		}
		host, port, _ := parseCredentialHost(cr.Host)
		cr.In = cmp.Or(cr.In, InHeader)
		c.list = append(c.list, credential{Credential: cr, host: host, port: port})
	}
	return c, nil
}

// Resolve resolves every credential's secret now, so that a call whose
// secret is missing fails before anything is sent.
func (c *Credentials) Resolve(ctx context.Context) error {
	for _, cr := range c.list {
		if _, err := c.value(ctx, cr); err != nil {
			return err
		}
	}
	return nil
}

// Carries reports whether a request to u gets a credential.
func (c *Credentials) Carries(u *url.URL) bool {
	o := originOf(u)
	return slices.ContainsFunc(c.list, func(cr credential) bool { return cr.matches(o) })
}

// Redactor cleans text of every value resolved so far.
func (c *Credentials) Redactor() *Redactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.red == nil {
		c.red = NewRedactor(c.sent)
	}
	return c.red
}

// value resolves cr's secret and keeps it, and the parts the request
// carries apart, to clean answers of.
func (c *Credentials) value(ctx context.Context, cr credential) (string, error) {
	v, err := c.secrets.Resolve(ctx, cr.Secret)
	if err != nil {
		return "", fmt.Errorf("credential for %s: %w", cr.Host, err)
	}
	keep := []secrets.Secret{secrets.New(cr.Secret, v)}
	for _, p := range cr.parts(v) {
		if err := secrets.NotePart(ctx, cr.Secret, p.what, p.value); err != nil {
			return "", fmt.Errorf("credential for %s: %w", cr.Host, err)
		}
		keep = append(keep, secrets.New(cr.Secret, p.value))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keep {
		if !slices.ContainsFunc(c.sent, func(s secrets.Secret) bool { return s.Reveal() == k.Reveal() }) {
			c.sent = append(c.sent, k)
			c.red = nil
		}
	}
	return v, nil
}

// part is a piece of a credential's value that a request carries apart
// from the rest.
type part struct{ what, value string }

// parts are the pieces of v, the value of c's secret, that a request
// carries apart from the rest. Each is looked for on its own in what
// comes back, beside v (Redactor), and refused when shorter than
// secrets.MinBytes. This is the one rule of every tool kind, since every
// kind adds its credentials here:
//
//   - basic: user:password goes as one base64 string, and an API that
//     decodes it may echo the password alone, so the password is a part.
//     The user is not (a name like "admin" is no secret), unless the
//     password is empty: then the user is the credential (an API key sent
//     as the user, as some APIs take it).
//   - a header whose prefix is "Basic " (the one way an MCP server's
//     headers can log in): v is the login in base64, so the decoded login
//     is a part, and so are its parts as basic's are.
//   - any other header (after its prefix), query and cookie: v is sent
//     whole, and has no parts.
func (c Credential) parts(v string) []part {
	switch {
	case c.In == InBasic:
		return loginParts(v)
	case c.In == InHeader && strings.EqualFold(strings.TrimSpace(c.Prefix), "basic"):
		login, err := base64.StdEncoding.DecodeString(v)
		if err != nil || !strings.Contains(string(login), ":") {
			return nil // not a login: the API refuses it, and v is looked for as it is
		}
		return append([]part{{"the decoded login", string(login)}}, loginParts(string(login))...)
	}
	return nil
}

// loginParts are the parts of a basic login, user:password.
func loginParts(login string) []part {
	user, pass, _ := strings.Cut(login, ":")
	if pass == "" {
		return []part{{"the user (the password is empty)", user}}
	}
	return []part{{"the password", pass}}
}

// Client returns a client that makes base's requests (its transport, so
// its egress policy, connection pool and time limit) with the credentials
// added, redirects checked and answers cleaned, as the type's doc says.
func (c *Credentials) Client(base *http.Client) *http.Client {
	if base == nil {
		base = &http.Client{}
	}
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	return &http.Client{
		Transport:     &credentialTransport{creds: c, next: next},
		CheckRedirect: c.checkRedirect(base.CheckRedirect),
		Timeout:       base.Timeout,
	}
}

// RedirectError is a redirect not followed because a credential is
// involved. Its chain holds an agent.CodeInvalid error: the model reads
// it, and a retry would be refused the same way.
type RedirectError struct {
	Status string // the redirect's, "302 Found"
	From   string // the URL redirected from, as messages show URLs (no query)
	To     string // the URL redirected to
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s redirects from %s to %s, another host: not followed, since credentials go to their own host only", e.Status, e.From, e.To)
}

func (e *RedirectError) Unwrap() error {
	return &agent.Error{Code: agent.CodeInvalid, Message: e.Error()}
}

func (c *Credentials) checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		prev := via[len(via)-1]
		if originOf(prev.URL) != originOf(req.URL) && (c.Carries(prev.URL) || c.Carries(req.URL)) {
			status := "the answer"
			if req.Response != nil {
				status = req.Response.Status
			}
			return &RedirectError{Status: status, From: shown(prev.URL), To: shown(req.URL)}
		}
		if next != nil {
			return next(req, via)
		}
		stripCrossOrigin(req, via)
		if len(via) > DefaultMaxRedirects {
			return agent.Errorf(agent.CodeInvalid, "too many redirects: more than %d", DefaultMaxRedirects)
		}
		return nil
	}
}

// crossOriginHeaders are the headers of a tool's request that a redirect
// to another origin keeps: what says which answer is wanted and what a
// forwarded body is. Everything else a tool set — a header from its
// config, the model's, an idempotency key — stays with the origin it was
// meant for.
var crossOriginHeaders = []string{"Accept", "Accept-Language", "Content-Type", "Content-Language", "User-Agent"}

// stripCrossOrigin removes, from a redirect to an origin other than the
// first request's, the headers Go copied from that request, and the
// Referer, which names the URL the tool called. Go itself keeps custom
// headers across hosts, and Authorization and cookies on a subdomain.
func stripCrossOrigin(req *http.Request, via []*http.Request) {
	if originOf(via[0].URL) == originOf(req.URL) {
		return
	}
	kept := http.Header{}
	for _, h := range crossOriginHeaders {
		if v := req.Header.Values(h); len(v) > 0 {
			kept[h] = v
		}
	}
	req.Header = kept
}

// credentialTransport adds credentials and cleans answers.
type credentialTransport struct {
	creds *Credentials
	next  http.RoundTripper
}

func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	asked := req
	o := originOf(req.URL)
	cloned := false
	if req.Header.Get("Accept-Encoding") != "" {
		// A body compressed at the caller's request would pass the
		// redactor unread; without it the transport asks for gzip itself
		// and hands over the body decompressed.
		req, cloned = req.Clone(req.Context()), true
		req.Header.Del("Accept-Encoding")
	}
	for _, cr := range t.creds.list {
		if !cr.matches(o) {
			continue
		}
		v, err := t.creds.value(req.Context(), cr)
		if err != nil {
			if req.Body != nil {
				req.Body.Close() // RoundTrip must close it, even on error
			}
			return nil, err
		}
		if !cloned {
			// RoundTrip must not change the caller's request: the
			// credential goes in a copy only.
			req, cloned = req.Clone(req.Context()), true
		}
		switch cr.In {
		case InHeader:
			req.Header.Set(cr.Name, cr.Prefix+v)
		case InQuery:
			q := req.URL.Query()
			q.Set(cr.Name, v)
			req.URL.RawQuery = q.Encode()
		case InCookie:
			req.AddCookie(&http.Cookie{Name: cr.Name, Value: v})
		case InBasic:
			user, pass, _ := strings.Cut(v, ":")
			req.SetBasicAuth(user, pass)
		}
	}
	resp, err := t.next.RoundTrip(req)
	red := t.creds.Redactor()
	if err != nil {
		return nil, red.Error(err)
	}
	// The answer is to the request the caller made: the copy with the
	// credentials stays here (http.Client names resp.Request's URL, query
	// and all, in its errors).
	resp.Request = asked
	if red.Empty() {
		return resp, nil
	}
	for name, values := range resp.Header {
		for i, v := range values {
			values[i] = red.String(v)
		}
		resp.Header[name] = values
	}
	resp.Body = red.Reader(resp.Body)
	// A placeholder is not as long as the value it replaces.
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}
