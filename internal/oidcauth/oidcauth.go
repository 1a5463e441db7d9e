// Package oidcauth verifies OIDC/JWT bearer tokens and maps their claims
// to an identity — tenant, roles and name — for the gateway, beside its
// static tokens.
//
// It imports only the domain: it must not import the gateway, which calls
// it.
//
// New discovers the issuer (its /.well-known/openid-configuration) and
// fetches its keys (jwks_uri); either failing fails New, so a gateway
// whose issuer cannot be reached does not start, as it does not when
// PostgreSQL or Temporal cannot be. Verify checks a token's signature
// against the issuer's keys, its issuer, its audience (required: an IdP
// signs tokens for all its clients) and its expiry, with
// github.com/coreos/go-oidc/v3; then Config maps the claims. Keys rotate:
// a token that names a key id the verifier does not hold makes it fetch
// the key set again, at most once per Config.MinRefetch however many such
// tokens arrive (keySet).
//
// A refused token is an *Error whose Reason says why (for the log and
// for operators); its text names claims and key ids, never the token, and
// is not for the client. The gateway tells the client only that the token
// was not accepted (or that it expired).
package oidcauth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentflow/agentflow/internal/agent"
)

// The variables an operator configures OIDC with.
const (
	EnvIssuer   = "AGENTFLOW_OIDC_ISSUER"
	EnvAudience = "AGENTFLOW_OIDC_AUDIENCE"
	EnvClaims   = "AGENTFLOW_OIDC_CLAIMS"
	EnvTenant   = "AGENTFLOW_OIDC_TENANT"
	EnvRoles    = "AGENTFLOW_OIDC_ROLES"
)

// Config of a Verifier.
type Config struct {
	// Issuer is the issuer's URL, exactly as its tokens' iss and its
	// discovery document say it: https, or http on a loopback address.
	// Env AGENTFLOW_OIDC_ISSUER; required.
	Issuer string
	// Audience is what a token's aud must hold: the client id or API
	// identifier the IdP issues agentflow's tokens for. Env
	// AGENTFLOW_OIDC_AUDIENCE; required.
	Audience string
	// Claims names the claims of the tenant, roles and name. Env
	// AGENTFLOW_OIDC_CLAIMS (ParseClaims).
	Claims Claims
	// Tenant fixes the tenant of every token of the issuer, for an IdP
	// that serves one tenant; exactly one of Tenant and Claims.Tenant is
	// set. Env AGENTFLOW_OIDC_TENANT.
	Tenant string
	// Roles maps the roles claim's values to agentflow's roles. Empty:
	// the claim's values that are role names are the roles; with no roles
	// claim either, every token is a user. Env AGENTFLOW_OIDC_ROLES
	// (ParseRoleMap).
	Roles RoleMap
	// MinRefetch is the least time between two fetches of the key set
	// for tokens with unknown key ids. Default 10 s.
	MinRefetch time.Duration
	// MaxKeyAge is how long keys are used before the next token fetches
	// them again, so that a key the issuer withdrew stops verifying.
	// Default 1 h.
	MaxKeyAge time.Duration
	// HTTPClient fetches the discovery document and the keys. Default:
	// a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock expiry and refetches are timed by. Default
	// time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMinRefetch = 10 * time.Second
	DefaultMaxKeyAge  = time.Hour
	fetchTimeout      = 10 * time.Second
)

// Validate reports a configuration that cannot work, naming the variable.
func (c Config) Validate() error {
	if c.Issuer == "" {
		return fmt.Errorf("%s is empty", EnvIssuer)
	}
	if err := checkURL(c.Issuer); err != nil {
		return fmt.Errorf("%s=%q: %w", EnvIssuer, c.Issuer, err)
	}
	switch {
	case c.Audience == "":
		return fmt.Errorf("%s is empty: set the client id or API identifier the issuer puts in agentflow's tokens' aud (without it a token issued to any of the issuer's clients would do)", EnvAudience)
	case c.Tenant == "" && c.Claims.Tenant == "":
		return fmt.Errorf("OIDC tokens need a tenant: name the claim that holds it (%s=tenant=<claim>,…) or fix one (%s=<tenant>)", EnvClaims, EnvTenant)
	case c.Tenant != "" && c.Claims.Tenant != "":
		return fmt.Errorf("%s and tenant= in %s both give the tenant: set one", EnvTenant, EnvClaims)
	case c.MinRefetch < 0 || c.MaxKeyAge < 0:
		return errors.New("OIDC: negative key refetch times")
	}
	if c.Tenant != "" {
		if err := agent.ValidateID("tenant", c.Tenant); err != nil {
			return fmt.Errorf("%s: %w", EnvTenant, err)
		}
	}
	return nil
}

// checkURL accepts https URLs, and http ones on a loopback address
// (an issuer run beside the gateway, or a test's): keys fetched over
// plain HTTP from elsewhere could be anyone's.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return errors.New("want https://host[/path], without user, query or fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return errors.New("want an https URL (http only on a loopback address)")
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// signingAlgs are the algorithms a token may be signed with: every
// asymmetric one go-oidc knows. None is symmetric, so no key of the
// issuer's can be used as an HMAC secret.
var signingAlgs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// Verifier verifies bearer tokens of one issuer. Safe for concurrent use.
type Verifier struct {
	cfg      Config
	keys     *keySet
	verifier *oidc.IDTokenVerifier
}

// New discovers the issuer and fetches its keys; it fails, naming the
// issuer and the variable, when either cannot be had.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.MinRefetch = cmp.Or(cfg.MinRefetch, DefaultMinRefetch)
	cfg.MaxKeyAge = cmp.Or(cfg.MaxKeyAge, DefaultMaxKeyAge)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OIDC issuer %s (%s): discovery: %w", cfg.Issuer, EnvIssuer, err)
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURI == "" {
		return nil, fmt.Errorf("OIDC issuer %s (%s): its discovery document names no jwks_uri", cfg.Issuer, EnvIssuer)
	}
	if err := checkURL(meta.JWKSURI); err != nil {
		return nil, fmt.Errorf("OIDC issuer %s (%s): jwks_uri %q: %w", cfg.Issuer, EnvIssuer, meta.JWKSURI, err)
	}
	algs := make([]jose.SignatureAlgorithm, len(signingAlgs))
	for i, a := range signingAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	ks := &keySet{url: meta.JWKSURI, client: cfg.HTTPClient, algs: algs, minRefetch: cfg.MinRefetch, maxAge: cfg.MaxKeyAge, now: cfg.Now}
	if err := ks.refresh(ctx, ""); err != nil {
		return nil, fmt.Errorf("OIDC issuer %s (%s): %w", cfg.Issuer, EnvIssuer, err)
	}
	return &Verifier{cfg: cfg, keys: ks, verifier: oidc.NewVerifier(cfg.Issuer, ks, &oidc.Config{
		ClientID: cfg.Audience, SupportedSigningAlgs: signingAlgs, Now: cfg.Now,
	})}, nil
}

// Issuer is the verifier's issuer.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Verify checks a bearer token and returns the identity its claims give.
// A refused token is an *Error.
func (v *Verifier) Verify(ctx context.Context, raw string) (Identity, error) {
	ctx, note := withNote(ctx)
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, v.classify(err, note)
	}
	var payload json.RawMessage
	if err := tok.Claims(&payload); err != nil {
		return Identity{}, &Error{Reason: InvalidClaims, Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		return Identity{}, &Error{Reason: InvalidClaims, Err: err}
	}
	return v.cfg.identity(claims)
}

// classify says why go-oidc refused a token. Its errors keep only the
// text of the key set's, so the key set notes its own (sigNote); a token
// whose signature verified failed on its claims, which say which.
func (v *Verifier) classify(err error, note *sigNote) *Error {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return &Error{Reason: Expired, Err: fmt.Errorf("expired at %s", expired.Expiry.UTC().Format(time.RFC3339))}
	case note.err != nil:
		return note.err
	case !note.called || note.payload == nil:
		return &Error{Reason: Malformed, Err: err}
	}
	var claims struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
	}
	_ = json.Unmarshal(note.payload, &claims)
	if claims.Iss != v.cfg.Issuer {
		return &Error{Reason: WrongIssuer, Err: fmt.Errorf("issuer %q; want %q", clip(claims.Iss), v.cfg.Issuer)}
	}
	var aud []string
	if json.Unmarshal(claims.Aud, &aud) != nil {
		var one string
		if json.Unmarshal(claims.Aud, &one) == nil {
			aud = []string{one}
		}
	}
	if !slices.Contains(aud, v.cfg.Audience) {
		return &Error{Reason: WrongAudience, Err: fmt.Errorf("audience %q; want %q", aud, v.cfg.Audience)}
	}
	return &Error{Reason: InvalidClaims, Err: err}
}

// Health reports the key set's last fetch: nil when it succeeded, else
// why it did not and how old the keys held are. Keys held keep verifying
// while the issuer is away.
func (v *Verifier) Health() error {
	fetched, _, _, err := v.keys.state()
	if err == nil {
		return nil
	}
	return fmt.Errorf("the last fetch of the issuer's keys failed (%v); keys from %s ago are in use", err, v.cfg.Now().Sub(fetched).Round(time.Second))
}

// Reason says why a token was refused.
type Reason string

// Reasons a token is refused.
const (
	// Malformed: not a signed JWT, or signed with an algorithm not taken.
	Malformed Reason = "malformed"
	// BadSignature: the signature does not verify with the key it names.
	BadSignature Reason = "bad_signature"
	// UnknownKey: the issuer publishes no key of the id the token names.
	UnknownKey Reason = "unknown_key"
	// KeysUnavailable: the token names a key id not held, and the issuer's
	// keys cannot be fetched. Not the token's fault: try again later.
	KeysUnavailable Reason = "keys_unavailable"
	// Expired: past its exp.
	Expired Reason = "expired"
	// WrongIssuer: iss is another issuer's.
	WrongIssuer Reason = "wrong_issuer"
	// WrongAudience: aud does not hold Config.Audience.
	WrongAudience Reason = "wrong_audience"
	// InvalidClaims: not yet valid (nbf), or claims that cannot be read.
	InvalidClaims Reason = "invalid_claims"
	// NoTenant: the claim that names the tenant is missing.
	NoTenant Reason = "no_tenant"
	// BadClaim: the tenant, roles or name claim has a wrong shape or value.
	BadClaim Reason = "bad_claim"
)

// Error is a refused token: why, and the details, for the log.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }
