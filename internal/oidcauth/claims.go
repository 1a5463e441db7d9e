package oidcauth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Claims names the claims of a token that give its identity
// (AGENTFLOW_OIDC_CLAIMS). A claim name is looked up as a top-level claim
// first; when the token has none of that name and the name has dots, as
// a path through nested objects (realm_access.roles). So namespaced
// claims such as https://example.com/tenant work as they are.
type Claims struct {
	// Tenant is the claim that holds the tenant id; "" when Config.Tenant
	// fixes the tenant instead.
	Tenant string
	// Roles is the claim that holds the roles: an array of strings, or
	// one string of names separated by spaces (as scope is). "" when no
	// claim gives roles (Config.Roles may still give every token some).
	Roles string
	// Name is the claim recorded as the caller's name (the approver of
	// its decisions); default sub. A token without it is named by its
	// sub.
	Name string
}

// maxClaimName bounds a claim name in the configuration.
const maxClaimName = 256

// ParseClaims reads AGENTFLOW_OIDC_CLAIMS: comma-separated
// <field>=<claim> entries, the fields tenant, roles and name, each at
// most once, e.g. tenant=org_id,roles=groups,name=email.
func ParseClaims(v string) (Claims, error) {
	var c Claims
	seen := map[string]bool{}
	for _, entry := range words.ListEntries(v) {
		field, claim, ok := strings.Cut(entry, "=")
		field, claim = strings.TrimSpace(field), strings.TrimSpace(claim)
		if !ok || claim == "" {
			return Claims{}, fmt.Errorf("%s: entry %q: want <field>=<claim>, e.g. tenant=org_id,roles=groups,name=email", EnvClaims, clip(entry))
		}
		if err := checkClaimName(claim); err != nil {
			return Claims{}, fmt.Errorf("%s: entry %q: %w", EnvClaims, clip(entry), err)
		}
		var dst *string
		switch field {
		case "tenant":
			dst = &c.Tenant
		case "roles":
			dst = &c.Roles
		case "name":
			dst = &c.Name
		default:
			return Claims{}, fmt.Errorf("%s: entry %q: unknown field %q (fields: tenant, roles, name)", EnvClaims, clip(entry), clip(field))
		}
		if seen[field] {
			return Claims{}, fmt.Errorf("%s: %s is given twice", EnvClaims, field)
		}
		seen[field], *dst = true, claim
	}
	return c, nil
}

// String is c as ParseClaims reads it.
func (c Claims) String() string {
	var parts []string
	for _, f := range []struct{ field, claim string }{{"tenant", c.Tenant}, {"roles", c.Roles}, {"name", c.Name}} {
		if f.claim != "" {
			parts = append(parts, f.field+"="+f.claim)
		}
	}
	return strings.Join(parts, ",")
}

func checkClaimName(claim string) error {
	switch {
	case len(claim) > maxClaimName:
		return fmt.Errorf("a claim name of %d bytes; the limit is %d", len(claim), maxClaimName)
	case !utf8.ValidString(claim):
		return fmt.Errorf("a claim name that is not UTF-8")
	case strings.ContainsFunc(claim, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("claim %q: a claim name has no spaces or control characters", claim)
	}
	return nil
}

// RoleMap maps the values of the roles claim (groups, app roles) to
// agentflow's roles (AGENTFLOW_OIDC_ROLES). A value it does not name
// gives no role; the value * gives its roles to every token.
type RoleMap struct {
	m map[string][]string
}

// Every is the RoleMap key whose roles every token gets.
const Every = "*"

// ParseRoleMap reads AGENTFLOW_OIDC_ROLES: comma-separated
// <value>=<role>[+<role>…] entries, split at the last '=' so that a
// value may hold one, e.g.
// *=user,agentflow-approvers=approver,agentflow-admins=admin+approver.
// A value may appear in several entries; roles are names of lower-case
// letters, digits, '-' and '_' (user, approver and admin open the API;
// others are for policies and rules).
func ParseRoleMap(v string) (RoleMap, error) {
	m := RoleMap{m: map[string][]string{}}
	for _, entry := range words.ListEntries(v) {
		i := strings.LastIndex(entry, "=")
		if i <= 0 || i == len(entry)-1 {
			return RoleMap{}, fmt.Errorf("%s: entry %q: want <claim value>=<role>[+<role>…], e.g. *=user,admins=admin", EnvRoles, clip(entry))
		}
		value, roles := strings.TrimSpace(entry[:i]), entry[i+1:]
		if err := checkClaimName(value); err != nil || value == "" {
			return RoleMap{}, fmt.Errorf("%s: entry %q: the claim value is empty or has spaces or control characters", EnvRoles, clip(entry))
		}
		for _, r := range strings.Split(roles, "+") {
			r = strings.TrimSpace(r)
			if !agent.ValidRole(r) {
				return RoleMap{}, fmt.Errorf("%s: entry %q: role %q: want lower-case letters, digits, '-' and '_' (the API's roles are user, approver and admin)", EnvRoles, clip(entry), clip(r))
			}
			if !slices.Contains(m.m[value], r) {
				m.m[value] = append(m.m[value], r)
			}
		}
	}
	if len(m.m) == 0 {
		return RoleMap{}, nil
	}
	return m, nil
}

// Empty reports whether m maps nothing: roles are then the claim's
// values as they are.
func (m RoleMap) Empty() bool { return len(m.m) == 0 }

// String is m as ParseRoleMap reads it, entries sorted.
func (m RoleMap) String() string {
	var parts []string
	for v, roles := range m.m {
		parts = append(parts, v+"="+strings.Join(roles, "+"))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// roles maps a token's claim values to roles: those of the values m
// names, and of Every.
func (m RoleMap) roles(values []string) []string {
	out := slices.Clone(m.m[Every])
	for _, v := range values {
		out = append(out, m.m[v]...)
	}
	return out
}

// Identity is who a token says its holder is, after the configuration's
// mapping: what the gateway makes a caller of.
type Identity struct {
	Tenant string
	// Name is the claim Claims.Name names, or the token's sub.
	Name  string
	Roles []string
	// Issuer is the token's iss (Config.Issuer) and Subject its sub:
	// where the identity comes from. A name is the IdP's to give and may
	// be anyone's (a static token's too); issuer and subject are one
	// user's.
	Issuer  string
	Subject string
}

// defaultRole is the role of a token when neither a roles claim nor a
// RoleMap is configured: the gateway's user, as a static token without
// roles has.
const defaultRole = "user"

// identity maps a verified token's claims to an identity: NoTenant when
// the tenant claim is missing, BadClaim when a claim has the wrong shape
// or value.
func (c Config) identity(claims map[string]any) (Identity, error) {
	sub, _ := claims["sub"].(string)
	if sub == "" || len(sub) > agent.MaxSubjectLength {
		return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("the token's sub is empty or longer than %d bytes: it names the user", agent.MaxSubjectLength)}
	}
	id := Identity{Tenant: c.Tenant, Issuer: c.Issuer, Subject: sub}
	if c.Claims.Tenant != "" {
		v, ok := lookup(claims, c.Claims.Tenant)
		if !ok || v == nil || v == "" {
			return Identity{}, &Error{Reason: NoTenant, Err: fmt.Errorf("the token has no claim %q, which names the tenant (%s)", c.Claims.Tenant, EnvClaims)}
		}
		s, err := scalar(v)
		if err != nil {
			return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q (the tenant): %w", c.Claims.Tenant, err)}
		}
		id.Tenant = s
	}
	if err := agent.ValidateID("tenant", id.Tenant); err != nil {
		return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q (the tenant): %w", c.Claims.Tenant, err)}
	}

	nameClaim := cmp.Or(c.Claims.Name, "sub")
	id.Name = sub
	if v, ok := lookup(claims, nameClaim); ok && v != nil && v != "" {
		s, err := scalar(v)
		if err != nil {
			return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q (the name): %w", nameClaim, err)}
		}
		id.Name = s
	}
	if id.Name == "" {
		return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("the token has neither claim %q nor sub to name its holder", nameClaim)}
	}
	if err := agent.ValidateID("name", id.Name); err != nil {
		return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q (the name): %w", nameClaim, err)}
	}

	var values []string
	if c.Claims.Roles != "" {
		if v, ok := lookup(claims, c.Claims.Roles); ok && v != nil {
			var err error
			if values, err = stringList(v); err != nil {
				return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q (the roles): %w", c.Claims.Roles, err)}
			}
		}
	}
	switch {
	case !c.Roles.Empty():
		id.Roles = c.Roles.roles(values)
	case c.Claims.Roles != "":
		// Values that cannot be roles (Domain Users, a group's path) are
		// groups of the IdP's, not agentflow's: they give none.
		id.Roles = slices.DeleteFunc(values, func(r string) bool { return !agent.ValidRole(r) })
	default:
		id.Roles = []string{defaultRole}
	}
	slices.Sort(id.Roles)
	id.Roles = slices.Compact(id.Roles)
	if len(id.Roles) > agent.MaxCallerRoles {
		return Identity{}, &Error{Reason: BadClaim, Err: fmt.Errorf("claim %q gives %d roles; the limit is %d: map the values that matter with %s", c.Claims.Roles, len(id.Roles), agent.MaxCallerRoles, EnvRoles)}
	}
	return id, nil
}

// lookup finds a claim by its name, or by its dotted path through nested
// objects when no top-level claim has the name.
func lookup(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = claims
	for _, part := range strings.Split(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// scalar is a claim that names one thing: a string, or an integer (some
// IdPs number their organisations).
func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x.String(), nil
		}
		return "", fmt.Errorf("a number that is not an integer; want a string")
	case []any:
		return "", fmt.Errorf("a list; want one value")
	}
	return "", fmt.Errorf("a %s; want a string", kind(v))
}

// stringList is a roles claim: an array of strings, or a string of names
// separated by spaces.
func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return strings.Fields(x), nil
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d is a %s; want strings", i, kind(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s; want a list of strings", kind(v))
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "JSON object"
	case []any:
		return "list"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case nil:
		return "null"
	}
	return "string"
}

// clip cuts a value quoted in an error.
func clip(s string) string { return words.Clip(s, 80) }
