// Package testissuer is a local OpenID Connect issuer for tests: RSA keys
// made in the test, its discovery document and JWKS served over HTTP by
// an httptest server, tokens signed with its keys, and key rotation. Only
// tests import it.
//
// It imports nothing of agentflow's.
package testissuer

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	jose "github.com/go-jose/go-jose/v4"
)

// Issuer is a running issuer. Safe for concurrent use.
type Issuer struct {
	// URL is the issuer's URL, its tokens' iss.
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey // every key made, by id
	publish []string                   // ids of the keys the JWKS holds
	current string                     // the id Sign signs with
	made    int
	fetches int
}

// Start serves an issuer with one key until the test's cleanup.
func Start(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{keys: map[string]*rsa.PrivateKey{}}
	i.srv = httptest.NewServer(http.HandlerFunc(i.serve))
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	kid := i.NewKey(t)
	i.mu.Lock()
	i.publish, i.current = []string{kid}, kid
	i.mu.Unlock()
	return i
}

func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": i.URL, "jwks_uri": i.URL + "/keys",
			"authorization_endpoint": i.URL + "/auth", "token_endpoint": i.URL + "/token",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{oidc.RS256},
		})
	case "/keys":
		i.mu.Lock()
		i.fetches++
		set := jose.JSONWebKeySet{}
		for _, kid := range i.publish {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: i.keys[kid].Public(), KeyID: kid, Algorithm: oidc.RS256, Use: "sig"})
		}
		i.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// NewKey makes a key the issuer does not publish yet, and returns its id.
func (i *Issuer) NewKey(t testing.TB) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testissuer: %v", err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.made++
	kid := fmt.Sprintf("key-%d", i.made)
	i.keys[kid] = key
	return kid
}

// Rotate publishes a new key in place of the old ones and signs with it
// from now on; it returns the new key's id.
func (i *Issuer) Rotate(t testing.TB) string {
	t.Helper()
	kid := i.NewKey(t)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.publish, i.current = []string{kid}, kid
	return kid
}

// Claims are a token's standard claims for audience aud: iss, aud, sub
// (ana), iat and exp (an hour on), with extra added or overriding them.
func (i *Issuer) Claims(aud string, extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": i.URL, "aud": aud, "sub": "ana", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	maps.Copy(c, extra)
	return c
}

// Sign signs claims with the current key.
func (i *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	i.mu.Lock()
	kid := i.current
	i.mu.Unlock()
	return i.SignAs(t, kid, kid, claims)
}

// SignAs signs claims with key keyID (made by NewKey) and names kid in
// the token's header: another id than the key's forges a signature.
func (i *Issuer) SignAs(t testing.TB, keyID, kid string, claims map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("testissuer: %v", err)
	}
	i.mu.Lock()
	key := i.keys[keyID]
	i.mu.Unlock()
	if key == nil {
		t.Fatalf("testissuer: no key %q", keyID)
	}
	return oidctest.SignIDToken(key, kid, oidc.RS256, string(raw))
}

// Fetches is how many times the JWKS was fetched.
func (i *Issuer) Fetches() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fetches
}

// Close stops serving: the issuer can no longer be reached.
func (i *Issuer) Close() { i.srv.Close() }
