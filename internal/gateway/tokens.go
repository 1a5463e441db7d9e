package gateway

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/words"
)

// Role is what a token may do.
type Role string

// Roles of tokens.
const (
	// RoleUser starts and follows turns, reads results and agents, sends
	// messages and cancels turns.
	RoleUser Role = "user"
	// RoleApprover decides tool calls that wait for approval.
	RoleApprover Role = "approver"
	// RoleAdmin changes and reads the catalog.
	RoleAdmin Role = "admin"
)

// AllRoles is every role that opens part of the API. A token may carry
// other roles too (supervisor, billing, …): they open nothing here, and
// approval policies and routing rules read them as caller.roles.
func AllRoles() []Role { return []Role{RoleUser, RoleApprover, RoleAdmin} }

// Caller is who the token's holder is, as turns record it and policies
// and rules read it (caller.name, caller.roles).
func (t Token) Caller() *agent.Caller {
	roles := make([]string, len(t.Roles))
	for i, r := range t.Roles {
		roles[i] = string(r)
	}
	return &agent.Caller{Name: t.Name, Roles: roles, Issuer: t.Issuer, Subject: t.Subject}
}

// answer is the answer text to question callID, as the token's holder's:
// its name, roles and where its identity comes from, whatever a request
// says.
func (t Token) AnswerQuestion(callID, text string) agent.Answer {
	return agent.Answer{CallID: callID, Text: text, Answerer: t.Name, Roles: t.Caller().Roles, AnswererIssuer: t.Issuer, AnswererSubject: t.Subject}
}

// Principal names the token's holder uniquely in the gateway: its tenant,
// and where its identity comes from (agent.Caller.Principal). Every
// binding to a caller (an MCP session, the stream of an MCP call) keys
// on it, never on the name, which an IdP's user may share with a static
// token's holder.
func (t Token) Principal() string { return t.Tenant + "/" + t.Caller().Principal() }

// Token is a bearer token the gateway accepts. Only its SHA-256 is kept:
// the token itself is in no table, log or memory after it is parsed.
type Token struct {
	Tenant string
	// Name identifies the token's holder: it is recorded as the approver
	// of the decisions made with it.
	Name  string
	Roles []Role
	// Issuer and Subject say where the identity comes from: the OIDC
	// issuer and the token's sub, or agent.IssuerStaticToken and Name for
	// a static token.
	Issuer, Subject string
	hash            [sha256.Size]byte
}

// NewToken returns the token whose secret is secret.
func NewToken(secret, tenant, name string, roles ...Role) (Token, error) {
	if secret == "" {
		return Token{}, fmt.Errorf("token of tenant %q: the token is empty", tenant)
	}
	return newToken(sha256.Sum256([]byte(secret)), tenant, name, roles)
}

func newToken(hash [sha256.Size]byte, tenant, name string, roles []Role) (Token, error) {
	if err := agent.ValidateID("tenant", tenant); err != nil || tenant == "" {
		return Token{}, fmt.Errorf("token for tenant %q: want a valid tenant id", tenant)
	}
	if len(roles) == 0 {
		roles = []Role{RoleUser}
	}
	if len(roles) > agent.MaxCallerRoles {
		return Token{}, fmt.Errorf("token of tenant %q: %d roles; the limit is %d", tenant, len(roles), agent.MaxCallerRoles)
	}
	for _, r := range roles {
		if !agent.ValidRole(string(r)) {
			return Token{}, fmt.Errorf("token of tenant %q: role %q: want lower-case letters, digits, '-' and '_' (the API's roles are user, approver and admin; others are for policies and rules)", tenant, r)
		}
	}
	name = cmp.Or(name, "token-"+hex.EncodeToString(hash[:4]))
	if err := agent.ValidateID("name", name); err != nil {
		return Token{}, fmt.Errorf("token of tenant %q: %w", tenant, err)
	}
	return Token{Tenant: tenant, Name: name, Roles: slices.Clone(roles), Issuer: agent.IssuerStaticToken, Subject: name, hash: hash}, nil
}

// Has reports whether the token has role r.
func (t Token) Has(r Role) bool { return slices.Contains(t.Roles, r) }

// Hash is the hex SHA-256 of the token, as AGENTFLOW_TOKENS may hold it.
func (t Token) Hash() string { return hex.EncodeToString(t.hash[:]) }

// matches compares a presented token with t in constant time.
func (t Token) matches(hash [sha256.Size]byte) bool {
	return subtle.ConstantTimeCompare(t.hash[:], hash[:]) == 1
}

// ParseTokens reads AGENTFLOW_TOKENS: comma-separated entries
//
//	<token>=<tenant>[:<roles>[:<name>]]
//
// where <token> is the token itself or sha256:<hex> of it (what
// `starter token new` prints, so that the token is never written down),
// <roles> joins roles with '+' (default: user): user, approver and admin
// open the API, any other (supervisor, …) is for policies and rules, and
// <name> is recorded as the approver of the token's decisions (default:
// token-<the first 8 hex digits of its hash>).
func ParseTokens(v string) ([]Token, error) {
	var out []Token
	for _, entry := range words.ListEntries(v) {
		secret, spec, ok := strings.Cut(entry, "=")
		if !ok || secret == "" || spec == "" {
			return nil, fmt.Errorf("AGENTFLOW_TOKENS: want <token>=<tenant>[:<roles>[:<name>]] entries separated by commas, got one without '=' or with an empty side")
		}
		t, err := ParseToken(secret, spec)
		if err != nil {
			return nil, fmt.Errorf("AGENTFLOW_TOKENS: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseToken reads one entry of AGENTFLOW_TOKENS: the token (or
// sha256:<hex>) and <tenant>[:<roles>[:<name>]].
func ParseToken(secret, spec string) (Token, error) {
	parts := strings.SplitN(spec, ":", 3)
	tenant, roles, name := parts[0], []Role(nil), ""
	if len(parts) > 1 && parts[1] != "" {
		for _, r := range strings.Split(parts[1], "+") {
			roles = append(roles, Role(r))
		}
	}
	if len(parts) > 2 {
		name = parts[2]
	}
	if h, ok := strings.CutPrefix(secret, "sha256:"); ok {
		raw, err := hex.DecodeString(h)
		if err != nil || len(raw) != sha256.Size {
			return Token{}, fmt.Errorf("token of tenant %q: sha256: wants %d hex digits", tenant, 2*sha256.Size)
		}
		return newToken([sha256.Size]byte(raw), tenant, name, roles)
	}
	return NewToken(secret, tenant, name, roles...)
}

// chatPage is the chat page's options for a dev token, which must be one
// of s's static tokens: the page signs in with it as its tenant.
func (s *Service) chatPage(devToken string) (chatpage.Options, error) {
	if devToken == "" {
		return chatpage.Options{}, nil
	}
	hash := sha256.Sum256([]byte(devToken))
	for _, t := range s.tokens {
		if t.matches(hash) {
			return chatpage.Options{DevToken: devToken, DevTenant: t.Tenant}, nil
		}
	}
	return chatpage.Options{}, errors.New("http api: the chat page's dev token (AGENTFLOW_CHAT_DEV_TOKEN) is none of the gateway's tokens (AGENTFLOW_TOKENS)")
}
