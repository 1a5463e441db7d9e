package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Caller is an authenticated caller: the name and roles its credential
// gives, and where the identity comes from. Two credentials may give one
// name (an identity provider's user whose email is a static token's
// name); Issuer and Subject tell them apart, and every binding to a
// caller (an MCP session, a job's request) and every record of one (an
// approval, a grant) keeps them.
type Caller struct {
	Name  string   `json:"name,omitempty"`
	Roles []string `json:"roles,omitempty"`
	// Issuer is the OIDC issuer's URL, or IssuerStaticToken; Subject is
	// the token's sub, or the static token's name.
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// IssuerStaticToken is the issuer of the gateway's static tokens
// (AGENTFLOW_TOKENS), whose subject is the token's name. No OIDC issuer
// has it: theirs are URLs.
const IssuerStaticToken = "agentflow:static-token"

// Bounds of where an identity comes from: an issuer's URL, and a subject
// (OIDC's sub is at most 255 ASCII characters).
const (
	MaxIssuerLength  = 1024
	MaxSubjectLength = 255
)

// Principal names the caller's identity uniquely: its issuer and
// subject, for bindings that must not mistake one caller for another of
// the same name. A caller without them (from before they were kept, or
// a request of Temporal's own clients) is named by its name alone.
func (c *Caller) Principal() string {
	if c == nil {
		return ""
	}
	if c.Issuer == "" && c.Subject == "" {
		return c.Name
	}
	b, _ := json.Marshal([]string{c.Issuer, c.Subject})
	return string(b)
}

// HasRole reports whether the caller's credential gives it role r. A nil
// caller has no roles.
func (c *Caller) HasRole(r string) bool {
	if c == nil {
		return false
	}
	return slices.Contains(c.Roles, r)
}

// RoleList is the caller's roles, never nil, for policies and rules.
func (c *Caller) RoleList() []string {
	if c == nil || c.Roles == nil {
		return []string{}
	}
	return c.Roles
}

// NameOf is the caller's name, "" for none.
func (c *Caller) NameOf() string {
	if c == nil {
		return ""
	}
	return c.Name
}

// MaxCallerRoles bounds the roles of a caller.
const MaxCallerRoles = 32

// ValidRole reports whether r may name a role a credential gives: a
// lower-case letter, then up to 63 lower-case letters, digits, '-' and
// '_'. Static tokens and OIDC claims are held to the same rule.
func ValidRole(r string) bool {
	if r == "" || len(r) > 64 || r[0] < 'a' || r[0] > 'z' {
		return false
	}
	for i := 1; i < len(r); i++ {
		c := r[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func (c *Caller) validate() error {
	if c == nil {
		return nil
	}
	if err := ValidateID("caller.name", c.Name); err != nil {
		return err
	}
	if len(c.Roles) > MaxCallerRoles {
		return Errorf(CodeInvalid, "caller has %d roles; the limit is %d", len(c.Roles), MaxCallerRoles)
	}
	if len(c.Issuer) > MaxIssuerLength || len(c.Subject) > MaxSubjectLength {
		return Errorf(CodeInvalid, "caller.issuer is longer than %d bytes, or caller.subject than %d", MaxIssuerLength, MaxSubjectLength)
	}
	for i, r := range c.Roles {
		if err := ValidateID(fmt.Sprintf("caller.roles[%d]", i), r); err != nil || r == "" {
			return Errorf(CodeInvalid, "caller.roles[%d] %q: want a role name", i, r)
		}
	}
	return nil
}

// MovedVariableHint says, for a CEL error about the undeclared user_role
// (of an approval policy or a routing rule), where it went: identity comes
// from the credential (caller.name, caller.roles), and what the client
// says of its user is client.user_role. "" for any other error.
func MovedVariableHint(celError string) string {
	if !strings.Contains(celError, "undeclared reference to 'user_role'") {
		return ""
	}
	return " (user_role was what the client said about itself: write client.user_role for that hint, or caller.roles for the roles of the caller's credential)"
}
