package secrets

import (
	"context"
	"fmt"
	"sync"
)

// MinBytes is the least length, in bytes, of a secret's value that a
// Recording resolver hands out.
//
// Secrets are kept out of what tools return by looking for their values
// (internal/egress.Redactor), which is only sound for a value that does not
// turn up in ordinary output by chance: a three-byte value such as "abc" or
// "200" would be found, and replaced, in words and numbers everywhere. Eight
// bytes are far from any real API key or token, and a value shorter than
// that is guessable, no credential worth the name. A short value is refused
// with an error that says so, rather than used and left unredacted.
const MinBytes = 8

// Seen collects the secrets resolved for one piece of work, a tool call:
// whatever resolves a secret through a Recording resolver with a context
// from WithSeen notes it there, so that the work's output can be cleaned
// of every value it may hold, however the value was used (a header, a
// query parameter, a stdio server's environment). Safe for concurrent use.
type Seen struct {
	mu     sync.Mutex
	list   []Secret
	values map[string]bool
}

type seenKey struct{}

// WithSeen returns a context whose Recording resolvers note what they
// resolve in the returned Seen.
func WithSeen(ctx context.Context) (context.Context, *Seen) {
	s := &Seen{values: map[string]bool{}}
	return context.WithValue(ctx, seenKey{}, s), s
}

// SeenIn returns the Seen of ctx, or nil.
func SeenIn(ctx context.Context) *Seen {
	s, _ := ctx.Value(seenKey{}).(*Seen)
	return s
}

// Note adds a secret; a value noted before is kept once.
func (s *Seen) Note(sec Secret) {
	if s == nil || sec.value == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.values[sec.value] {
		s.values[sec.value] = true
		s.list = append(s.list, sec)
	}
}

// Secrets returns the secrets noted so far, in the order they were first
// resolved.
func (s *Seen) Secrets() []Secret {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Secret(nil), s.list...)
}

// Len is the number of secrets noted so far.
func (s *Seen) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// ErrTooShort is wrapped by a Recording resolver's error for a value
// shorter than MinBytes.
var ErrTooShort = fmt.Errorf("shorter than %d bytes", MinBytes)

// NotePart notes a part of a resolved secret's value that a request
// carries apart from the rest (basic authentication's password, which an
// API that decodes the login may echo alone) in the Seen of ctx, so that
// the work's output is cleaned of the part on its own too, under the
// secret's reference. A part shorter than MinBytes is refused
// (ErrTooShort), as a value that short is: it could not be told apart
// from ordinary text. what names the part in the error: "the password".
func NotePart(ctx context.Context, ref, what, part string) error {
	if len(part) < MinBytes {
		return fmt.Errorf("secret %s: %s is %d bytes, %w: a secret that short would be guessed, and could not be told apart from ordinary text to keep it out of what tools return", ref, what, len(part), ErrTooShort)
	}
	SeenIn(ctx).Note(New(ref, part))
	return nil
}

// Recording returns a resolver that resolves through r, refuses values
// shorter than MinBytes (ErrTooShort), and notes every value it returns in
// the Seen of the call's context, if it has one. The tool registry gives
// tools such a resolver, so that one rule covers every tool kind.
func Recording(r Resolver) Resolver {
	if rec, ok := r.(recording); ok {
		return rec
	}
	return recording{next: r}
}

type recording struct{ next Resolver }

func (r recording) Resolve(ctx context.Context, ref string) (string, error) {
	v, err := r.next.Resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	if len(v) < MinBytes {
		return "", fmt.Errorf("secret %s: the value is %d bytes, %w: a secret that short would be guessed, and could not be told apart from ordinary text to keep it out of what tools return", ref, len(v), ErrTooShort)
	}
	SeenIn(ctx).Note(New(ref, v))
	return v, nil
}
