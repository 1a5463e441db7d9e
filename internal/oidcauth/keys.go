package oidcauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxKeySetBytes bounds the issuer's JWKS document: a few keys take a
// few KiB.
const maxKeySetBytes = 1 << 20

// keySet is the issuer's signing keys (its JWKS), fetched at start and
// again when a token names a key id it does not hold — how an issuer
// rotates keys: it publishes the new key, then signs with it — or when
// the keys are older than maxAge, so that a key the issuer withdrew stops
// verifying. Fetches are one at a time and at most one per minRefetch,
// whatever tokens arrive: a flood of tokens with made-up key ids costs the
// issuer one request per minRefetch, not one each. A token whose key id
// is known but whose signature does not verify is refused without a
// fetch (go-oidc's RemoteKeySet fetches on every failed verification).
//
// It implements go-oidc's KeySet; the verifier checks the algorithm,
// issuer, audience and expiry.
type keySet struct {
	url        string
	client     *http.Client
	algs       []jose.SignatureAlgorithm
	minRefetch time.Duration
	maxAge     time.Duration
	now        func() time.Time

	fetching sync.Mutex // held by the one fetch at a time

	mu      sync.Mutex // guards the fields below
	keys    []jose.JSONWebKey
	fetched time.Time // of the keys held
	tried   time.Time // the last fetch, whatever its outcome
	lastErr error     // of the last fetch
	fetches int
}

// sigNote carries what the key set found out of go-oidc's verifier, whose
// errors keep only the text of the key set's.
type sigNote struct {
	called  bool
	payload []byte
	err     *Error
}

type noteKey struct{}

func withNote(ctx context.Context) (context.Context, *sigNote) {
	n := &sigNote{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// VerifySignature verifies the token's signature with the issuer's key
// it names, and returns its payload.
func (ks *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	note, _ := ctx.Value(noteKey{}).(*sigNote)
	if note == nil {
		note = &sigNote{}
	}
	note.called = true
	payload, err := ks.verify(ctx, raw)
	if err != nil {
		note.err = err
		return nil, err
	}
	note.payload = payload
	return payload, nil
}

func (ks *keySet) verify(ctx context.Context, raw string) ([]byte, *Error) {
	jws, err := jose.ParseSigned(raw, ks.algs)
	if err != nil {
		return nil, &Error{Reason: Malformed, Err: err}
	}
	if len(jws.Signatures) != 1 {
		return nil, &Error{Reason: Malformed, Err: fmt.Errorf("%d signatures; want one", len(jws.Signatures))}
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, stale := ks.lookup(kid)
	switch {
	case len(keys) == 0:
		if err := ks.refresh(ctx, kid); err != nil {
			return nil, &Error{Reason: KeysUnavailable, Err: err}
		}
		keys, _ = ks.lookup(kid)
	case stale && ks.fetching.TryLock():
		// Old keys: fetch them again, unless a fetch is under way, which
		// a token whose key is held need not wait for. A failure keeps
		// the keys, and Health says so.
		_ = ks.refreshLocked(ctx, "")
		ks.fetching.Unlock()
		keys, _ = ks.lookup(kid)
	}
	if len(keys) == 0 {
		return nil, &Error{Reason: UnknownKey, Err: fmt.Errorf("key id %q is not in the issuer's key set (%s)", kid, ks.url)}
	}
	for _, k := range keys {
		if payload, err := jws.Verify(&k); err == nil {
			return payload, nil
		}
	}
	if kid == "" {
		return nil, &Error{Reason: BadSignature, Err: errors.New("the token names no key id, and no key of the issuer's verifies its signature")}
	}
	return nil, &Error{Reason: BadSignature, Err: fmt.Errorf("the signature does not verify with the issuer's key %q", kid)}
}

// lookup returns the keys a token with key id kid may be signed with
// (every key when it names none), and whether they are older than maxAge.
func (ks *keySet) lookup(kid string) (keys []jose.JSONWebKey, stale bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, k := range ks.keys {
		if kid == "" || k.KeyID == kid {
			keys = append(keys, k)
		}
	}
	return keys, ks.now().Sub(ks.fetched) > ks.maxAge
}

// refresh fetches the key set unless another fetch brought key id kid
// while this one waited, or the last fetch was less than minRefetch ago.
// A failed fetch keeps the keys held. kid "" asks for a fetch at start.
func (ks *keySet) refresh(ctx context.Context, kid string) error {
	ks.fetching.Lock()
	defer ks.fetching.Unlock()
	return ks.refreshLocked(ctx, kid)
}

// refreshLocked is refresh with fetching held.
func (ks *keySet) refreshLocked(ctx context.Context, kid string) error {
	ks.mu.Lock()
	tried, lastErr := ks.tried, ks.lastErr
	ks.mu.Unlock()
	if !tried.IsZero() {
		if keys, stale := ks.lookup(kid); kid != "" && len(keys) > 0 && !stale {
			return nil
		}
		if ks.now().Sub(tried) < ks.minRefetch {
			return lastErr
		}
	}
	keys, err := ks.fetch(ctx)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.tried, ks.lastErr = ks.now(), err
	ks.fetches++
	if err == nil {
		ks.keys, ks.fetched = keys, ks.tried
	}
	return err
}

// fetch reads the key set, keeping the keys it can verify signatures
// with: a key of a type or algorithm go-jose does not know, or one for
// encryption, is skipped, as RFC 7517 §5 asks.
func (ks *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, fmt.Errorf("key set %s: %w", ks.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("key set %s: %s", ks.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("key set %s: %w", ks.url, err)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("key set %s: larger than %d bytes", ks.url, maxKeySetBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("key set %s: not a JWKS document: %w", ks.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) != nil || k.Use == "enc" || k.Algorithm != "" && !slices.Contains(ks.algs, jose.SignatureAlgorithm(k.Algorithm)) {
			continue
		}
		// A symmetric key has no public half, and is no issuer's to publish.
		if pub := k.Public(); pub.Valid() {
			keys = append(keys, pub)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("key set %s: no signing key agentflow can use (of %d)", ks.url, len(doc.Keys))
	}
	return keys, nil
}

// state is the key set's last fetch, for health checks.
func (ks *keySet) state() (fetched, tried time.Time, fetches int, lastErr error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.fetched, ks.tried, ks.fetches, ks.lastErr
}
