package oidcauth_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/testissuer"
)

const aud = "agentflow-test"

func mustClaims(t *testing.T, v string) oidcauth.Claims {
	t.Helper()
	c, err := oidcauth.ParseClaims(v)
	require.NoError(t, err)
	return c
}

func mustRoles(t *testing.T, v string) oidcauth.RoleMap {
	t.Helper()
	m, err := oidcauth.ParseRoleMap(v)
	require.NoError(t, err)
	return m
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func reasonOf(t *testing.T, err error) oidcauth.Reason {
	t.Helper()
	var e *oidcauth.Error
	require.True(t, errors.As(err, &e), "%v is no *oidcauth.Error", err)
	return e.Reason
}

// TestVerify: a good token gives the mapped identity; each kind of bad
// token is refused for its reason, and the error never holds the token.
func TestVerify(t *testing.T) {
	iss := testissuer.Start(t)
	v, err := oidcauth.New(context.Background(), oidcauth.Config{
		Issuer: iss.URL, Audience: aud,
		Claims: mustClaims(t, "tenant=org_id,roles=groups,name=email"),
		Roles:  mustRoles(t, "agentflow-admins=admin+user,agentflow-approvers=approver"),
	})
	require.NoError(t, err)
	require.Equal(t, 1, iss.Fetches(), "the keys are fetched at start")

	good := map[string]any{"org_id": "acme", "groups": []string{"agentflow-admins", "Engineering"}, "email": "ana@example.com"}
	// with is the good claims changed by extra; a nil value removes one.
	with := func(extra map[string]any) map[string]any {
		out := iss.Claims(aud, good)
		for k, x := range extra {
			if x == nil {
				delete(out, k)
			} else {
				out[k] = x
			}
		}
		return out
	}
	stranger := iss.NewKey(t)
	hmac := make([]byte, 32)
	_, _ = rand.Read(hmac)
	past := time.Now().Add(-time.Minute).Unix()

	tests := []struct {
		name  string
		token string
		want  oidcauth.Identity
		why   oidcauth.Reason
	}{
		{name: "good", token: iss.Sign(t, with(nil)),
			want: oidcauth.Identity{Tenant: "acme", Name: "ana@example.com", Roles: []string{"admin", "user"}, Issuer: iss.URL, Subject: "ana"}},
		{name: "an integer tenant", token: iss.Sign(t, with(map[string]any{"org_id": 42, "groups": []string{"agentflow-approvers"}})),
			want: oidcauth.Identity{Tenant: "42", Name: "ana@example.com", Roles: []string{"approver"}, Issuer: iss.URL, Subject: "ana"}},
		{name: "no groups, no roles", token: iss.Sign(t, with(map[string]any{"groups": nil})),
			want: oidcauth.Identity{Tenant: "acme", Name: "ana@example.com", Issuer: iss.URL, Subject: "ana"}},
		{name: "audience in a list", token: iss.Sign(t, with(map[string]any{"aud": []string{"other", aud}})),
			want: oidcauth.Identity{Tenant: "acme", Name: "ana@example.com", Roles: []string{"admin", "user"}, Issuer: iss.URL, Subject: "ana"}},
		{name: "expired", token: iss.Sign(t, with(map[string]any{"exp": past})), why: oidcauth.Expired},
		{name: "no exp", token: iss.Sign(t, with(map[string]any{"exp": nil})), why: oidcauth.Expired},
		{name: "wrong audience", token: iss.Sign(t, with(map[string]any{"aud": "another-app"})), why: oidcauth.WrongAudience},
		{name: "wrong issuer", token: iss.Sign(t, with(map[string]any{"iss": "https://idp.example.com"})), why: oidcauth.WrongIssuer},
		{name: "bad signature", token: iss.SignAs(t, stranger, "key-1", with(nil)), why: oidcauth.BadSignature},
		{name: "unknown key", token: iss.SignAs(t, stranger, stranger, with(nil)), why: oidcauth.UnknownKey},
		{name: "HMAC with a public key's id", token: oidctest.SignIDToken(hmac, "key-1", "HS256", mustJSON(t, with(nil))), why: oidcauth.Malformed},
		{name: "not a JWT", token: "not.a.jwt", why: oidcauth.Malformed},
		{name: "not yet valid", token: iss.Sign(t, with(map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})), why: oidcauth.InvalidClaims},
		{name: "no tenant claim", token: iss.Sign(t, with(map[string]any{"org_id": nil})), why: oidcauth.NoTenant},
		{name: "an empty tenant", token: iss.Sign(t, with(map[string]any{"org_id": ""})), why: oidcauth.NoTenant},
		{name: "a tenant with a slash", token: iss.Sign(t, with(map[string]any{"org_id": "acme/x"})), why: oidcauth.BadClaim},
		{name: "tenants in a list", token: iss.Sign(t, with(map[string]any{"org_id": []string{"a", "b"}})), why: oidcauth.BadClaim},
		{name: "groups of numbers", token: iss.Sign(t, with(map[string]any{"groups": []int{1}})), why: oidcauth.BadClaim},
		{name: "no sub", token: iss.Sign(t, with(map[string]any{"sub": nil})), why: oidcauth.BadClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tt.token)
			if tt.why == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, id)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.why, reasonOf(t, err), "%v", err)
			require.NotContains(t, err.Error(), tt.token)
		})
	}
	require.Equal(t, 1, iss.Fetches(), "a bad signature under a known key id fetches nothing, and the unknown key id came within MinRefetch of the start")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestKeyRotation: a token signed with a key the issuer publishes after
// the verifier started is accepted once the key set is fetched again; a
// key the issuer withdrew stops verifying; made-up key ids cost the
// issuer one fetch per MinRefetch, however many arrive.
func TestKeyRotation(t *testing.T) {
	iss := testissuer.Start(t)
	clk := &clock{now: time.Now()}
	v, err := oidcauth.New(context.Background(), oidcauth.Config{
		Issuer: iss.URL, Audience: aud, Tenant: "acme",
		MinRefetch: time.Minute, MaxKeyAge: 10 * time.Minute, Now: clk.Now,
	})
	require.NoError(t, err)
	claims := iss.Claims(aud, nil)
	old := iss.Sign(t, claims)
	id, err := v.Verify(context.Background(), old)
	require.NoError(t, err)
	require.Equal(t, oidcauth.Identity{Tenant: "acme", Name: "ana", Roles: []string{"user"}, Issuer: iss.URL, Subject: "ana"}, id)

	// A new key right after a fetch waits out MinRefetch.
	kid := iss.Rotate(t)
	rotated := iss.Sign(t, claims)
	_, err = v.Verify(context.Background(), rotated)
	require.Equal(t, oidcauth.UnknownKey, reasonOf(t, err))
	require.Equal(t, 1, iss.Fetches())

	clk.advance(2 * time.Minute)
	id, err = v.Verify(context.Background(), rotated)
	require.NoError(t, err, "key %s", kid)
	require.Equal(t, "acme", id.Tenant)
	require.Equal(t, 2, iss.Fetches())
	_, err = v.Verify(context.Background(), old)
	require.Equal(t, oidcauth.UnknownKey, reasonOf(t, err), "the withdrawn key no longer verifies")

	// A flood of made-up key ids: no fetch within MinRefetch.
	stranger := iss.NewKey(t)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			_, err := v.Verify(context.Background(), iss.SignAs(t, stranger, stranger, claims))
			if reasonOf(t, err) != oidcauth.UnknownKey {
				t.Errorf("made-up key id: %v", err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 2, iss.Fetches())
	clk.advance(2 * time.Minute)
	_, err = v.Verify(context.Background(), iss.SignAs(t, stranger, stranger, claims))
	require.Equal(t, oidcauth.UnknownKey, reasonOf(t, err))
	require.Equal(t, 3, iss.Fetches(), "one fetch once MinRefetch has passed")

	// Keys older than MaxKeyAge are fetched again by the next token.
	clk.advance(11 * time.Minute)
	_, err = v.Verify(context.Background(), rotated)
	require.NoError(t, err)
	require.Equal(t, 4, iss.Fetches())
	require.NoError(t, v.Health())
}

// TestIssuerAway: an issuer that cannot be reached fails New, naming it
// and the variable; one that goes away later leaves the keys held
// verifying, refuses a token with a key id not held as unavailable, and
// says so in Health.
func TestIssuerAway(t *testing.T) {
	iss := testissuer.Start(t)
	gone := iss.URL
	clk := &clock{now: time.Now()}
	v, err := oidcauth.New(context.Background(), oidcauth.Config{Issuer: iss.URL, Audience: aud, Tenant: "acme", Now: clk.Now})
	require.NoError(t, err)
	held := iss.Sign(t, iss.Claims(aud, nil))
	stranger := iss.NewKey(t)
	unknown := iss.SignAs(t, stranger, stranger, iss.Claims(aud, nil))
	iss.Close()

	_, err = oidcauth.New(context.Background(), oidcauth.Config{Issuer: gone, Audience: aud, Tenant: "acme"})
	require.ErrorContains(t, err, "OIDC issuer "+gone+" (AGENTFLOW_OIDC_ISSUER): discovery: ")

	_, err = v.Verify(context.Background(), held)
	require.NoError(t, err)
	clk.advance(time.Minute)
	_, err = v.Verify(context.Background(), unknown)
	require.Equal(t, oidcauth.KeysUnavailable, reasonOf(t, err), "%v", err)
	require.ErrorContains(t, v.Health(), "the last fetch of the issuer's keys failed")
	_, err = v.Verify(context.Background(), held)
	require.NoError(t, err, "the keys held still verify")

	// Discovery that works, keys that do not.
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer keys.Close()
	var disc *httptest.Server
	disc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": disc.URL, "jwks_uri": keys.URL + "/keys"})
	}))
	defer disc.Close()
	_, err = oidcauth.New(context.Background(), oidcauth.Config{Issuer: disc.URL, Audience: aud, Tenant: "acme"})
	require.ErrorContains(t, err, "OIDC issuer "+disc.URL+" (AGENTFLOW_OIDC_ISSUER): key set "+keys.URL+"/keys: 503 Service Unavailable")
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  oidcauth.Config
		want string
	}{
		{"no issuer", oidcauth.Config{Audience: aud, Tenant: "acme"}, "AGENTFLOW_OIDC_ISSUER is empty"},
		{"plain http elsewhere", oidcauth.Config{Issuer: "http://idp.example.com", Audience: aud, Tenant: "acme"}, "want an https URL (http only on a loopback address)"},
		{"a query", oidcauth.Config{Issuer: "https://idp.example.com/?x=1", Audience: aud, Tenant: "acme"}, "without user, query or fragment"},
		{"no audience", oidcauth.Config{Issuer: "https://idp.example.com", Tenant: "acme"}, "AGENTFLOW_OIDC_AUDIENCE is empty"},
		{"no tenant", oidcauth.Config{Issuer: "https://idp.example.com", Audience: aud}, "OIDC tokens need a tenant"},
		{"two tenants", oidcauth.Config{Issuer: "https://idp.example.com", Audience: aud, Tenant: "acme", Claims: oidcauth.Claims{Tenant: "org"}}, "both give the tenant"},
		{"a bad fixed tenant", oidcauth.Config{Issuer: "https://idp.example.com", Audience: aud, Tenant: "a b"}, "AGENTFLOW_OIDC_TENANT: tenant \"a b\" may not contain spaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, tt.cfg.Validate(), tt.want)
		})
	}
	require.NoError(t, oidcauth.Config{Issuer: "https://idp.example.com/realms/acme", Audience: aud, Tenant: "acme"}.Validate())
	require.NoError(t, oidcauth.Config{Issuer: "http://127.0.0.1:8081", Audience: aud, Claims: oidcauth.Claims{Tenant: "org"}}.Validate())
}

// BenchmarkVerify: what a request with an OIDC token costs the gateway
// (an RS256 signature with a 2048-bit key, the claims and the mapping).
func BenchmarkVerify(b *testing.B) {
	iss := testissuer.Start(b)
	claims, err := oidcauth.ParseClaims("tenant=org_id,roles=groups,name=email")
	require.NoError(b, err)
	v, err := oidcauth.New(context.Background(), oidcauth.Config{Issuer: iss.URL, Audience: aud, Claims: claims})
	require.NoError(b, err)
	token := iss.Sign(b, iss.Claims(aud, map[string]any{"org_id": "acme", "groups": []string{"user", "approver"}, "email": "ana@example.com"}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), token); err != nil {
			b.Fatal(err)
		}
	}
}
