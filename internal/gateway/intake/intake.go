// Package intake reads what clients send the gateway — request bodies and
// WebSocket messages — within the operator's bounds, so that no client
// can make the gateway hold more of its bytes than it allows:
//
//   - a body is read only for an authenticated caller: the gateway gives
//     an unauthenticated request a Refused body, which reads nothing;
//   - a body is at most Body.Max bytes, refused before any byte is read
//     when its declared length is larger (413);
//   - the bytes of bodies being received are bounded per client (its
//     credential) and in total (Budget), a body's declared length
//     reserved before its first byte is read (429);
//   - a body arrives by its Deadline, or is cut off (408).
//
// A body's bytes count from its first read until it has been read to
// its end, fails, or is closed: what the gateway holds for a client
// that sends slowly, or not at all.
//
// It imports only the domain: the core and the doors use it, so it must not
// import them.
package intake

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Settings that bound a Budget, as the errors name them.
const (
	EnvClientBytes = "AGENTFLOW_HTTP_CLIENT_INFLIGHT_BYTES"
	EnvTotalBytes  = "AGENTFLOW_HTTP_INFLIGHT_BYTES"
	EnvTimeout     = "AGENTFLOW_HTTP_BODY_TIMEOUT"
)

// Error is a body refused or cut short: Err says why (an *agent.Error,
// whose code classifies it), Status is the HTTP status that says so.
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Budget bounds the bytes of bodies being received: per client, and in
// total. It is safe for concurrent use.
type Budget struct {
	perClient, total int64

	mu   sync.Mutex
	used map[string]int64
	sum  int64
}

// NewBudget returns a Budget of perClient bytes per client and total
// bytes in all; both must be positive.
func NewBudget(perClient, total int64) *Budget {
	return &Budget{perClient: perClient, total: total, used: map[string]int64{}}
}

// take reserves n bytes for client, or refuses them (429) when the
// client's or the total would pass its bound.
func (b *Budget) take(client string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.used[client]+n > b.perClient:
		return &Error{Status: http.StatusTooManyRequests, Err: agent.Errorf(agent.CodeRateLimited,
			"your requests' bodies being received on this gateway would pass %d bytes, the limit per caller (%s): send fewer at once, or try again later",
			b.perClient, EnvClientBytes)}
	case b.sum+n > b.total:
		return &Error{Status: http.StatusTooManyRequests, Err: agent.Errorf(agent.CodeRateLimited,
			"the gateway is receiving as many bytes of request bodies as it takes (%s): try again shortly", EnvTotalBytes)}
	}
	b.used[client] += n
	b.sum += n
	return nil
}

// give returns n bytes of client's.
func (b *Budget) give(client string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[client] -= n; b.used[client] <= 0 {
		delete(b.used, client)
	}
	b.sum -= n
}

// InFlight is how many bytes client has reserved, and all clients together.
func (b *Budget) InFlight(client string) (clients, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used[client], b.sum
}

// Body reads one body, or one WebSocket message, from Src within its
// bounds. Read it to its end, or Close it: either gives its bytes back
// to the Budget. A Body is not for concurrent use.
type Body struct {
	// Src is what the client sends. Closing the Body does not close it:
	// an HTTP server closes a request's body itself.
	Src io.Reader
	// Budget and Client: whose bytes the body's are, and what bounds them.
	Budget *Budget
	Client string
	// Max is the most bytes the body may have.
	Max int64
	// Length is the declared length, -1 when unknown (chunked, or a
	// WebSocket message): a known one is reserved, and checked against
	// Max, before anything is read; an unknown one is reserved as it is read.
	Length int64
	// Deadline is when the body must have arrived; a read that fails
	// after it (the connection's read deadline, or a cancelled context)
	// fails with 408. Zero: none.
	Deadline time.Time

	read    int64 // bytes read
	held    int64 // bytes reserved
	started bool
	err     error // once a read fails, every read fails so
	done    bool
}

// Read implements io.Reader.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.started {
		b.started = true
		if err := b.begin(); err != nil {
			return 0, b.fail(err)
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	// One byte past Max shows a body longer than it may be.
	want := min(int64(len(p)), b.Max-b.read+1)
	if b.Length < 0 {
		if err := b.Budget.take(b.Client, want); err != nil {
			return 0, b.fail(err)
		}
		b.held += want
	}
	n, err := b.Src.Read(p[:want])
	if b.Length < 0 {
		b.Budget.give(b.Client, want-int64(n))
		b.held -= want - int64(n)
	}
	b.read += int64(n)
	switch {
	case b.read > b.Max:
		return 0, b.fail(b.tooLarge())
	case errors.Is(err, io.EOF):
		b.finish()
		b.err = io.EOF
		return n, io.EOF
	case err != nil:
		return n, b.fail(b.readError(err))
	}
	return n, nil
}

// ReadAll reads the body to its end. A body of a declared length is read
// into a buffer of that length, made once the length is reserved: what
// it holds is what the Budget counts, not the doublings of a growing one.
func (b *Body) ReadAll() ([]byte, error) {
	if _, err := b.Read(nil); err != nil { // reserves, or refuses, the declared length
		if errors.Is(err, io.EOF) {
			return []byte{}, nil
		}
		return nil, err
	}
	size := int64(512)
	if b.Length >= 0 {
		size = b.Length + 1 // and one byte to see the end
	}
	data := make([]byte, 0, size)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := b.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		switch {
		case errors.Is(err, io.EOF):
			return data, nil
		case err != nil:
			return nil, err
		}
	}
}

// begin checks a declared length and reserves it.
func (b *Body) begin() error {
	switch {
	case b.Length > b.Max:
		return b.tooLarge()
	case b.Length > 0:
		if err := b.Budget.take(b.Client, b.Length); err != nil {
			return err
		}
		b.held = b.Length
	}
	return nil
}

// Close gives the body's bytes back; reading it after fails.
func (b *Body) Close() error {
	b.finish()
	if b.err == nil {
		b.err = &Error{Status: http.StatusBadRequest, Err: agent.Errorf(agent.CodeInvalid, "the request body was closed")}
	}
	return nil
}

func (b *Body) fail(err error) error {
	b.finish()
	b.err = err
	return err
}

// finish gives back what the body holds, once.
func (b *Body) finish() {
	if b.done {
		return
	}
	b.done = true
	if b.held > 0 {
		b.Budget.give(b.Client, b.held)
		b.held = 0
	}
}

func (b *Body) tooLarge() error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Err: agent.Errorf(agent.CodeInvalid, "the request body is larger than %d bytes", b.Max)}
}

// readError is a failed read of Src: 408 once the deadline has passed.
func (b *Body) readError(err error) error {
	if !b.Deadline.IsZero() && !time.Now().Before(b.Deadline) {
		return &Error{Status: http.StatusRequestTimeout, Err: agent.Errorf(agent.CodeTimeout,
			"the request body did not arrive in time: send it within the gateway's body timeout (%s)", EnvTimeout)}
	}
	return &Error{Status: http.StatusBadRequest, Err: agent.Errorf(agent.CodeInvalid, "the request body could not be read: %s", clip(err.Error()))}
}

// Refused is the body of a request whose caller is not authenticated:
// every read fails with err, and the HTTP status that says why (401, or
// 503 when the credential could not be checked), and reads nothing.
func Refused(status int, err error) io.ReadCloser { return refused{&Error{Status: status, Err: err}} }

type refused struct{ err error }

func (r refused) Read([]byte) (int, error) { return 0, r.err }
func (r refused) Close() error             { return nil }

// clip bounds a read error's text, which the client reads.
func clip(s string) string { return words.Clip(s, 200) }
