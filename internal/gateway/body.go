package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
)

// How every door reads what a client sends: one body reader
// (internal/gateway/intake), given to each request before any door runs
// (admit). A request's credential is checked from its headers first; an
// unauthenticated request's body is never read (its reads fail, the
// answer closes the connection), so that an anonymous client holds
// nothing of the gateway's. An authenticated one's body is bounded in
// size (MaxBodyBytes; an upload's limit for POST /v1/files), its bytes
// in flight count against its credential's share and the gateway's total
// (HTTPOptions.ClientInflightBytes, InflightBytes) while they arrive, and
// it must arrive within HTTPOptions.BodyTimeout of the request's headers:
// a connection that stalls is cut off with 408. Doors read bodies with
// ReadBody (or limitBody, for handlers of libraries that read them), and
// WebSocket messages the same way (socket.readMessage).

// Defaults of HTTPOptions' body bounds.
const (
	// DefaultBodyTimeout: a body that has not arrived this long after
	// its request's headers is cut off. A 4 MiB body needs 140 KB/s;
	// slower clients of large uploads need a longer one.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultClientInflightBytes: what one credential's bodies may hold
	// while they arrive, or the largest upload with its multipart
	// framing when that is more.
	DefaultClientInflightBytes = 64 << 20
	// DefaultInflightBytes: what every client's bodies together may hold
	// while they arrive, or ClientInflightBytes when that is more.
	DefaultInflightBytes = 256 << 20
)

// MaxInflightBytes bounds HTTPOptions.ClientInflightBytes and InflightBytes.
const MaxInflightBytes = 16 << 30

// Check reports what is wrong with o's limits, as NewHTTPAPI would, for
// a process to refuse its configuration before it starts anything.
func (o HTTPOptions) Check() error {
	_, _, err := o.bounds()
	return err
}

// bounds checks o's upload and body limits, with their defaults.
func (o HTTPOptions) bounds() (int64, bodyBounds, error) {
	maxUpload, err := checkMaxUpload(o.MaxUploadBytes)
	if err != nil {
		return 0, bodyBounds{}, err
	}
	body, err := newBodyBounds(o, maxUpload)
	return maxUpload, body, err
}

// bodyBounds are an HTTP API's checked body settings.
type bodyBounds struct {
	timeout time.Duration
	budget  *intake.Budget
}

// newBodyBounds checks o's body settings, with maxUpload, the largest
// upload, which one client must be able to send.
func newBodyBounds(o HTTPOptions, maxUpload int64) (bodyBounds, error) {
	largest := max(MaxBodyBytes, maxUpload+multipartSlack)
	client := cmp.Or(o.ClientInflightBytes, max(DefaultClientInflightBytes, largest))
	total := cmp.Or(o.InflightBytes, max(DefaultInflightBytes, client))
	timeout := cmp.Or(o.BodyTimeout, DefaultBodyTimeout)
	switch {
	case timeout < 0:
		return bodyBounds{}, errors.New("http api: a negative body timeout")
	case client < largest || client > MaxInflightBytes:
		return bodyBounds{}, fmt.Errorf("http api: %d bytes in flight per client: want %d (the largest body or upload) to %d (%s)",
			client, largest, MaxInflightBytes, intake.EnvClientBytes)
	case total < client || total > MaxInflightBytes:
		return bodyBounds{}, fmt.Errorf("http api: %d bytes in flight in all: want %d (the bytes per client) to %d (%s)",
			total, client, MaxInflightBytes, intake.EnvTotalBytes)
	}
	return bodyBounds{timeout: timeout, budget: intake.NewBudget(client, total)}, nil
}

// bodyKey holds a request's *intake.Body in its context.
type bodyKey struct{}

// admit gives a request its body reader, before any door runs, and
// returns what ends it once the request is answered. A request without
// a body is as it was.
func (a *HTTPAPI) admit(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	rc := http.NewResponseController(w)
	authz := r.Header.Values("Authorization")
	var caller Token
	var err error
	if prefix, ok := a.ownsCredential(r.URL.Path); ok && len(authz) == 0 {
		// Its door checks the request's own credential before it reads
		// the body; the body's share is the route's.
		caller = Token{Tenant: prefix, Name: r.URL.Path}
	} else {
		caller, err = a.svc.Authenticate(WithAuthorization(r.Context(), authz))
	}
	ctx := r.Context()
	if len(authz) > 0 {
		// The door checks the same header again: it is answered from here.
		ctx = context.WithValue(ctx, authMemoKey{}, authMemo{authorization: authz[0], caller: caller, err: err})
	}
	r = r.WithContext(ctx)
	// A read deadline of the connection: it cuts off a stalled body, and
	// bounds how long the server, once the request is answered, waits to
	// skip what it did not read of a small one. It does not cut an answer
	// that streams for hours: net/http clears it once the body has been
	// read to its end, when it starts watching the connection for the
	// client going away.
	deadline := time.Now().Add(a.body.timeout)
	_ = rc.SetReadDeadline(deadline)
	if err != nil {
		// Nothing of the body is read: the answer closes the connection.
		w.Header().Set("Connection", "close")
		r.Body = intake.Refused(agent.ErrorCode(err).Class().HTTP, err)
		return r, func() {}
	}
	b := &intake.Body{Src: r.Body, Budget: a.body.budget, Client: caller.Tenant + "/" + caller.Name, Max: MaxBodyBytes,
		Length: r.ContentLength, Deadline: deadline}
	r = r.WithContext(context.WithValue(ctx, bodyKey{}, b))
	r.Body = b
	return r, func() { _ = b.Close() }
}

// OwnCredential declares that requests under the path prefix carry a
// credential of their door's protocol, not a bearer token (a Telegram
// bot's secret token): their bodies are bounded as every other's, and
// their door checks that credential before it reads one. Doors call it
// as they register their routes.
func (a *HTTPAPI) OwnCredential(prefix string) {
	*a.ownCredential = append(*a.ownCredential, prefix)
}

// ownsCredential is the OwnCredential prefix path is under, if any.
func (a *HTTPAPI) ownsCredential(path string) (string, bool) {
	for _, p := range *a.ownCredential {
		if strings.HasPrefix(path, p) {
			return p, true
		}
	}
	return "", false
}

// allowBody lets a request's body be up to max bytes instead of
// MaxBodyBytes, before any of it is read.
func allowBody(r *http.Request, max int64) {
	if b, ok := r.Context().Value(bodyKey{}).(*intake.Body); ok {
		b.Max = max
	}
}

// ReadBody reads a request's whole body, as admit bounds it.
func ReadBody(r *http.Request) ([]byte, error) {
	var data []byte
	var err error
	switch b := r.Body.(type) {
	case nil:
		return nil, nil
	case *intake.Body:
		data, err = b.ReadAll()
	default:
		data, err = io.ReadAll(b)
	}
	if err != nil {
		return nil, bodyReadError(err)
	}
	return data, nil
}

// bodyReadError is a failed read of a body, with the HTTP status that
// says why.
func bodyReadError(err error) error {
	if e, ok := errors.AsType[*intake.Error](err); ok {
		return WithHTTPStatus(e.Status, e)
	}
	return agent.Errorf(agent.CodeInvalid, "the request body could not be read")
}

// IsBodyError reports whether err is a body refused or cut off: its
// answer is written even though the server has ended the request's
// context, as it does when a read fails.
func IsBodyError(err error) bool {
	var e *intake.Error
	return errors.As(err, &e)
}

// LimitBody reads a request's body before the handlers do, for handlers
// of libraries (grpc-gateway's, the MCP SDK's) that read it themselves:
// a body refused or cut off is answered here, and nothing is called.
func (a *HTTPAPI) LimitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		data, err := ReadBody(r)
		if err != nil {
			a.Fail(w, r, err, 0)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}
