package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
)

// maxIdlePerHost is how many idle connections to one host a client keeps
// for its next calls. Go's default is two: turns that call one API at
// the same time then closed all but two of their connections after each
// round, and every other call of the next round paid a new TCP and TLS
// handshake.
const maxIdlePerHost = 64

// Client returns an HTTP client that obeys p. Each client has its own
// connection pool; build one per tenant and reuse it.
func Client(p Policy) *http.Client {
	d := &dialer{policy: &p, resolver: p.Resolver}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	transport := &http.Transport{
		// No Proxy: a proxy from the environment would dial for us and so
		// bypass the address check.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * maxIdlePerHost,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     &roundTripper{policy: &p, next: transport},
		CheckRedirect: p.checkRedirect,
		Timeout:       p.timeout(),
	}
}

// checkRedirect checks a redirect by name before it is followed; its
// addresses are checked when they are dialled. A redirect to another
// origin than the first request's carries none of that request's headers
// but a few harmless ones (stripCrossOrigin): whatever a tool set was
// meant for the host it called.
func (p *Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > p.maxRedirects() {
		return agent.Errorf(agent.CodeInvalid, "too many redirects: %s allows %d", p.policyName(), p.maxRedirects())
	}
	if err := p.checkURL(req.URL); err != nil {
		return fmt.Errorf("redirect to %s: %w", shown(req.URL), err)
	}
	stripCrossOrigin(req, via)
	return nil
}

func (p *Policy) policyName() string {
	if p.Tenant == "" {
		return "the egress policy"
	}
	return "tenant " + p.Tenant + "'s egress policy"
}

// roundTripper checks every request by name and caps response bodies. It
// checks redirects too, so the transport is safe even in a client without
// checkRedirect.
type roundTripper struct {
	policy *Policy
	next   http.RoundTripper
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.policy.checkURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTrip must close it, even on error
		}
		return nil, err
	}
	resp, err := t.send(req)
	if err != nil {
		return nil, err
	}
	limit := t.policy.maxResponseBytes()
	if n, ok := req.Context().Value(streamedKey{}).(int64); ok {
		limit = n
	}
	tooLarge := &agent.Error{Code: agent.CodeInvalid, Err: &TooLargeError{URL: shown(req.URL), Limit: limit}}
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, tooLarge
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: limit, tooLarge: tooLarge}
	return resp, nil
}

// send sends req, through the call's delivery gate when it has one and
// req is a write (internal/delivery): its intent recorded before it
// leaves, and what became of it after. A write the gate holds back is
// not sent: the gate's error says why.
func (t *roundTripper) send(req *http.Request) (*http.Response, error) {
	g := effects.From(req.Context())
	if g == nil || effects.IdempotentMethod(req.Method) {
		return t.next.RoundTrip(req)
	}
	if err := g.Begin(req.Context(), req.Method+" "+shown(req.URL)); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTrip must close it, even on error
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	switch {
	case err == nil:
		g.Answered(req.Context(), resp.StatusCode)
	case effects.NotSent(err):
		g.Unsent(req.Context())
	}
	return resp, err
}

// TooLargeError is the error of a response larger than the policy's
// MaxResponseBytes (or a Streamed request's limit), in an
// agent.CodeInvalid error's chain.
type TooLargeError struct {
	URL   string // as messages show URLs: no query
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("response of %s is larger than %d bytes", e.URL, e.Limit)
}

// Streamed marks a request whose response body its caller streams to
// storage as it arrives (a download kept as a file, Call.WriteBlob; an
// API's document, narrowed as it is read) rather than holds in memory:
// its body is capped at limit instead of the policy's MaxResponseBytes,
// which bounds what a tool holds. Every other rule of the policy holds
// as for any request, its time limit included.
func Streamed(ctx context.Context, limit int64) context.Context {
	return context.WithValue(ctx, streamedKey{}, limit)
}

type streamedKey struct{}

// limitedBody fails a read that goes past the cap, rather than ending the
// body early as io.LimitReader would: a cut response must not pass for a
// whole one.
type limitedBody struct {
	io.ReadCloser
	left     int64 // bytes that may still be read
	tooLarge error
	err      error // sticky once the cap is passed
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more than allowed tells a full body from a larger one
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		n, b.err = int(b.left), b.tooLarge
		b.left = 0
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}

// dialer resolves a host once, checks every address, and dials only the
// addresses it checked.
type dialer struct {
	policy   *Policy
	resolver Resolver
	net      net.Dialer
}

func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.dial(ctx, network, address)
	if err != nil {
		// No connection: nothing of a request was sent (a tool call's
		// write gate withdraws its intent).
		return nil, &effects.NotSentError{Err: err}
	}
	return c, nil
}

func (d *dialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port: %w", address, err)
	}
	addrs, err := d.resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	// Dial the allowed addresses only; a name that also resolves to
	// refused ones (dual-stack, or a rebinding attempt) still works
	// through the others.
	var refusal error
	var allowed []netip.AddrPort
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if err := d.policy.checkAddr(host, ap); err != nil {
			refusal = cmp.Or(refusal, err)
			continue
		}
		allowed = append(allowed, ap)
	}
	if len(allowed) == 0 {
		return nil, refusal
	}
	var errs []error
	for _, ap := range allowed {
		c, err := d.net.DialContext(ctx, network, ap.String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (d *dialer) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	ipNetwork := "ip"
	switch network {
	case "tcp4":
		ipNetwork = "ip4"
	case "tcp6":
		ipNetwork = "ip6"
	}
	addrs, err := d.resolver.LookupNetIP(ctx, ipNetwork, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("lookup %s: no addresses", host)
	}
	return addrs, nil
}
