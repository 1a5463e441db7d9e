// Package effects keeps a tool call's writes to systems agentflow does
// not own from reaching them twice. Activities are retried: a worker that
// dies (or is cut off) while a call's request is in flight leaves no
// answer, and the retry would send the request again. Where the far side
// deduplicates (an idempotent method, an Idempotency-Key the API
// declares, an MCP tool annotated idempotent or read-only, or a catalog
// entry's delivery: idempotent), sending again is safe, and the call is
// retried as before. Everywhere else a call is delivered at most once:
// before a write leaves, its intent is recorded durably under the call's
// key (Ledger.Intend); an attempt that finds another attempt's intent
// does not send, and the call's outcome is unknown (MaybeSentError),
// which the model is told as such. A zombie attempt — one Temporal timed
// out while it was cut off, and retried — is fenced the same way: the
// newer attempt's intent is another attempt's to it. Only a person
// sends an unknown call again: a tool that asks for approval asks again,
// and an approval is a delivery of its own (Key.Resend).
//
// The Gate is the one place that applies the rule, for every tool kind:
// the tenant's egress transport asks it before every request that is not
// idempotent by method (internal/egress), and a kind whose writes do not
// go over HTTP (MCP's tools/call, over any transport) asks it itself.
//
// It imports nothing of agentflow's: the store implements Ledger.
package effects

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Key names one delivery of a tool call: the step that stores its
// result, and Resend, the approval id of a person's decision to send the
// call again after its outcome was unknown (empty for the call as the
// model made it). A re-send is a delivery of its own, at most once too:
// its intent is its own record, beside the first's, which says who let
// it past the first.
type Key struct {
	TenantID, JobID string
	Seq             int
	Resend          string
}

// Intent is what the ledger holds of a call's writes.
type Intent struct {
	// Attempt is the attempt that recorded it (Gate.Attempt).
	Attempt string
	// Target is the last write's method and URL (no query), or the MCP
	// method and tool: what the model is told may have happened.
	Target string
	// Delivered says the far side answered that write, with Status (an
	// HTTP status; 0 for none, such as an MCP answer).
	Delivered bool
	Status    int
	// At is when it was recorded.
	At time.Time
}

// Ledger records intents durably. Intend records that attempt is about
// to send target, unless another attempt recorded an intent for the call
// first: then it records nothing, and returns that intent and false.
// Answered marks the attempt's intent delivered with the far side's
// status; Release withdraws an intent whose request certainly never
// left (nothing of the call was sent before it). Each touches only the
// intent of the attempt named.
type Ledger interface {
	Intend(ctx context.Context, k Key, attempt, target string) (Intent, bool, error)
	Answered(ctx context.Context, k Key, attempt string, status int) error
	Release(ctx context.Context, k Key, attempt string) error
}

// Gate applies at-most-once delivery to one attempt of one call.
type Gate struct {
	ledger  Ledger
	key     Key
	attempt string

	mu       sync.Mutex
	begun    int  // writes Begin let go
	answered bool // the far side answered one of them
	open     bool // the last one left and was not answered
}

// NewGate is the gate of one attempt of the call k: each attempt has its
// own (a random attempt id), so that one finds another's intent.
func NewGate(l Ledger, k Key) *Gate {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return &Gate{ledger: l, key: k, attempt: hex.EncodeToString(b)}
}

// MaybeSentError is a write the gate did not send because an earlier
// attempt of the call may have sent it (or a newer one is sending it):
// the call's outcome is unknown. Intent is that attempt's record.
type MaybeSentError struct {
	Intent Intent
}

func (e *MaybeSentError) Error() string {
	if e.Intent.Delivered {
		status := ""
		if e.Intent.Status > 0 {
			status = fmt.Sprintf(" (HTTP %d)", e.Intent.Status)
		}
		return fmt.Sprintf("an earlier attempt of this call sent %s and was answered%s, but that answer never reached the turn; it was not sent again", e.Intent.Target, status)
	}
	return fmt.Sprintf("an earlier attempt of this call was sending %s when it was interrupted: it may or may not have taken effect, and it was not sent again", e.Intent.Target)
}

// Begin records that the attempt is about to send target, and says
// whether it may: a *MaybeSentError when another attempt recorded an
// intent for the call first. A ledger that cannot be reached is an
// error too: nothing is sent without its intent recorded.
func (g *Gate) Begin(ctx context.Context, target string) error {
	prior, ok, err := g.ledger.Intend(ctx, g.key, g.attempt, target)
	if err != nil {
		return fmt.Errorf("record the intent to send %s: %w", target, err)
	}
	if !ok {
		return &MaybeSentError{Intent: prior}
	}
	g.mu.Lock()
	g.begun++
	g.open = true
	g.mu.Unlock()
	return nil
}

// Answered records that the far side answered the write Begin let go,
// with status (an HTTP status; 0 for none). An error recording it is
// dropped: the intent stands, which errs on the side of not sending.
func (g *Gate) Answered(ctx context.Context, status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answered, g.open = true, false
	_ = g.ledger.Answered(context.WithoutCancel(ctx), g.key, g.attempt, status)
}

// Unsent records that the write Begin let go certainly never left (its
// connection could not be made: NotSent): its intent is withdrawn when
// it was the attempt's only write, so a retry may send it. A write that
// failed any other way may have arrived: say nothing, and its intent
// stands.
func (g *Gate) Unsent(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = false
	if g.begun == 1 && !g.answered {
		g.begun = 0
		_ = g.ledger.Release(context.WithoutCancel(ctx), g.key, g.attempt)
	}
}

// Sent reports whether a write of this attempt may have reached the far
// side, and whether the last one is still unanswered (it left, and no
// answer came: its effect is unknown).
func (g *Gate) Sent() (sent, unanswered bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.begun > 0, g.open
}

// NotSentError is a failure that certainly sent nothing: a connection
// that could not be made (the egress dialer's every failure).
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// NotSent reports whether err says the request never left: a
// NotSentError, or a dial that failed.
func NotSent(err error) bool {
	var ns *NotSentError
	var op *net.OpError
	return errors.As(err, &ns) || errors.As(err, &op) && op.Op == "dial"
}

// IdempotentMethod reports whether an HTTP method is idempotent by
// definition (RFC 9110: GET, HEAD, OPTIONS, TRACE, PUT, DELETE): sending
// it again does what sending it once did.
func IdempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

type gateKey struct{}
type idempotentKey struct{}

// With is ctx whose writes g gates.
func With(ctx context.Context, g *Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// From is ctx's gate; nil for none (a call delivered as Idempotent, or no
// call at all).
func From(ctx context.Context) *Gate {
	if ctx.Value(idempotentKey{}) != nil {
		return nil
	}
	g, _ := ctx.Value(gateKey{}).(*Gate)
	return g
}

// Without is ctx with no gate: the requests a kind makes around its
// write (an MCP session's initialize) are not the write, which the kind
// gates itself.
func Without(ctx context.Context) context.Context {
	return context.WithValue(ctx, gateKey{}, (*Gate)(nil))
}

// IdempotentHere is ctx whose requests the far side deduplicates (an
// operation that declares an Idempotency-Key, which the request sends):
// the transport sends them without a gate.
func IdempotentHere(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}
