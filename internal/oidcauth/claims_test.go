package oidcauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestParseClaims(t *testing.T) {
	tests := []struct {
		v    string
		want Claims
		err  string
	}{
		{v: "", want: Claims{}},
		{v: "tenant=org_id,roles=groups,name=email", want: Claims{Tenant: "org_id", Roles: "groups", Name: "email"}},
		{v: " roles = realm_access.roles , tenant=https://example.com/tenant ", want: Claims{Tenant: "https://example.com/tenant", Roles: "realm_access.roles"}},
		{v: "tenant=a=b", want: Claims{Tenant: "a=b"}},
		{v: "tenant", err: "AGENTFLOW_OIDC_CLAIMS: entry \"tenant\": want <field>=<claim>"},
		{v: "tenant=", err: "want <field>=<claim>"},
		{v: "group=groups", err: `unknown field "group" (fields: tenant, roles, name)`},
		{v: "tenant=a,tenant=b", err: "AGENTFLOW_OIDC_CLAIMS: tenant is given twice"},
		{v: "name=e mail", err: "a claim name has no spaces or control characters"},
		{v: "name=" + strings.Repeat("x", 300), err: "a claim name of 300 bytes; the limit is 256"},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			c, err := ParseClaims(tt.v)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c)
		})
	}
}

func TestParseRoleMap(t *testing.T) {
	m, err := ParseRoleMap("*=user, agentflow-admins=admin+approver ,CN=Approvers=approver,agentflow-admins=user")
	require.NoError(t, err)
	require.Equal(t, "*=user,CN=Approvers=approver,agentflow-admins=admin+approver+user", m.String())
	require.Equal(t, []string{"user", "admin", "approver", "user", "approver"}, m.roles([]string{"agentflow-admins", "CN=Approvers", "unknown"}))
	empty, err := ParseRoleMap(" , ")
	require.NoError(t, err)
	require.True(t, empty.Empty())

	for _, tt := range []struct{ v, err string }{
		{"admins", "AGENTFLOW_OIDC_ROLES: entry \"admins\": want <claim value>=<role>"},
		{"=admin", "want <claim value>=<role>"},
		{"admins=", "want <claim value>=<role>"},
		{"admins=Admin", `role "Admin": want lower-case letters`},
		{"admins=admin+", `role "": want lower-case letters`},
		{"domain admins=admin", "the claim value is empty or has spaces"},
	} {
		_, err := ParseRoleMap(tt.v)
		require.ErrorContains(t, err, tt.err, tt.v)
	}
}

// TestIdentity: how claims become a tenant, a name and roles.
func TestIdentity(t *testing.T) {
	mapped, err := ParseRoleMap("*=user,agentflow-admins=admin")
	require.NoError(t, err)
	byClaim := Claims{Tenant: "org", Roles: "groups", Name: "email"}
	tests := []struct {
		name   string
		cfg    Config
		claims string
		want   Identity
		why    Reason
	}{
		{name: "mapped roles", cfg: Config{Claims: byClaim, Roles: mapped},
			claims: `{"sub":"u1","org":"acme","email":"ana@example.com","groups":["agentflow-admins","Engineering"]}`,
			want:   Identity{Tenant: "acme", Name: "ana@example.com", Roles: []string{"admin", "user"}, Subject: "u1"}},
		{name: "roles as they are, those that are role names", cfg: Config{Claims: byClaim},
			claims: `{"sub":"u1","org":"acme","groups":["approver","Domain Users","/staff","supervisor","approver"]}`,
			want:   Identity{Tenant: "acme", Name: "u1", Roles: []string{"approver", "supervisor"}, Subject: "u1"}},
		{name: "roles in a string, as scope", cfg: Config{Claims: Claims{Tenant: "org", Roles: "scope"}},
			claims: `{"sub":"u1","org":"acme","scope":"openid  user approver"}`,
			want:   Identity{Tenant: "acme", Name: "u1", Roles: []string{"approver", "openid", "user"}, Subject: "u1"}},
		{name: "a nested roles claim", cfg: Config{Claims: Claims{Tenant: "org", Roles: "realm_access.roles"}},
			claims: `{"sub":"u1","org":"acme","realm_access":{"roles":["admin"]}}`,
			want:   Identity{Tenant: "acme", Name: "u1", Roles: []string{"admin"}, Subject: "u1"}},
		{name: "a namespaced claim with dots", cfg: Config{Claims: Claims{Tenant: "https://agentflow.example.com/tenant"}},
			claims: `{"sub":"u1","https://agentflow.example.com/tenant":"acme"}`,
			want:   Identity{Tenant: "acme", Name: "u1", Roles: []string{"user"}, Subject: "u1"}},
		{name: "a fixed tenant, no roles claim", cfg: Config{Tenant: "acme"},
			claims: `{"sub":"u1","org":"evil"}`,
			want:   Identity{Tenant: "acme", Name: "u1", Roles: []string{"user"}, Subject: "u1"}},
		{name: "the name claim missing: sub", cfg: Config{Claims: byClaim},
			claims: `{"sub":"u1","org":"acme"}`,
			want:   Identity{Tenant: "acme", Name: "u1", Subject: "u1"}},
		{name: "no tenant", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1"}`, why: NoTenant},
		{name: "a tenant of null", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":null}`, why: NoTenant},
		{name: "a path that is no object", cfg: Config{Claims: Claims{Tenant: "org.id"}}, claims: `{"sub":"u1","org":"acme"}`, why: NoTenant},
		{name: "a tenant object", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":{"id":"acme"}}`, why: BadClaim},
		{name: "a fractional tenant", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":1.5}`, why: BadClaim},
		{name: "no sub", cfg: Config{Claims: byClaim}, claims: `{"org":"acme","email":"ana@example.com"}`, why: BadClaim},
		{name: "a sub too long", cfg: Config{Claims: byClaim}, claims: `{"sub":"` + strings.Repeat("u", 256) + `","org":"acme"}`, why: BadClaim},
		{name: "the issuer kept", cfg: Config{Issuer: "https://idp.example", Tenant: "acme"}, claims: `{"sub":"u1"}`,
			want: Identity{Tenant: "acme", Name: "u1", Roles: []string{"user"}, Issuer: "https://idp.example", Subject: "u1"}},
		{name: "a name with spaces", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":"acme","email":"ana b"}`, why: BadClaim},
		{name: "roles of a wrong shape", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":"acme","groups":{"a":1}}`, why: BadClaim},
		{name: "too many roles", cfg: Config{Claims: byClaim}, claims: `{"sub":"u1","org":"acme","groups":[` + manyRoles(40) + `]}`, why: BadClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.cfg.identity(decodeClaims(t, tt.claims))
			if tt.why != "" {
				var e *Error
				require.True(t, errors.As(err, &e), "%v", err)
				require.Equal(t, tt.why, e.Reason, "%v", err)
				return
			}
			require.NoError(t, err)
			if len(tt.want.Roles) == 0 {
				require.Empty(t, id.Roles)
				tt.want.Roles = id.Roles
			}
			require.Equal(t, tt.want, id)
		})
	}
}

func manyRoles(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"r` + strings.Repeat("x", i) + `"`)
	}
	return b.String()
}

func decodeClaims(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// FuzzParseClaims: any AGENTFLOW_OIDC_CLAIMS value is claims that read
// back the same, or an error that names the variable.
func FuzzParseClaims(f *testing.F) {
	for _, s := range []string{"tenant=org_id,roles=groups,name=email", "roles=realm_access.roles", "tenant=https://x/t", "tenant", "=x", "tenant=a,tenant=b", "name=a b", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := ParseClaims(v)
		if err != nil {
			require.Contains(t, err.Error(), EnvClaims)
			return
		}
		again, err := ParseClaims(c.String())
		require.NoError(t, err, "%q", c.String())
		require.Equal(t, c, again)
	})
}

// FuzzParseRoleMap: any AGENTFLOW_OIDC_ROLES value is a map whose roles
// are role names and that reads back the same, or an error that names
// the variable.
func FuzzParseRoleMap(f *testing.F) {
	for _, s := range []string{"*=user,admins=admin+approver", "CN=x=admin", "a=", "=a", "a=B", "a=b+", " , "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := ParseRoleMap(v)
		if err != nil {
			require.Contains(t, err.Error(), EnvRoles)
			return
		}
		for _, roles := range m.m {
			for _, r := range roles {
				require.True(t, agent.ValidRole(r), r)
			}
		}
		again, err := ParseRoleMap(m.String())
		require.NoError(t, err, "%q", m.String())
		require.Equal(t, m.String(), again.String())
	})
}

// FuzzIdentity: whatever a signed token's claims hold, the mapping gives
// a valid identity or an *Error.
func FuzzIdentity(f *testing.F) {
	f.Add("tenant=org,roles=groups,name=email", "*=user", `{"sub":"u","org":"acme","groups":["a"],"email":"e"}`)
	f.Add("tenant=a.b,roles=r", "", `{"a":{"b":7},"r":"x y"}`)
	f.Add("roles=groups", "", `{"sub":"u","groups":[1,2]}`)
	f.Fuzz(func(t *testing.T, claimsCfg, rolesCfg, payload string) {
		claims, err := ParseClaims(claimsCfg)
		if err != nil {
			return
		}
		roles, err := ParseRoleMap(rolesCfg)
		if err != nil {
			return
		}
		cfg := Config{Claims: claims, Roles: roles}
		if claims.Tenant == "" {
			cfg.Tenant = "fixed"
		}
		dec := json.NewDecoder(strings.NewReader(payload))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			return
		}
		id, err := cfg.identity(m)
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "%v", err)
			return
		}
		require.NotEmpty(t, id.Tenant)
		require.NoError(t, agent.ValidateID("tenant", id.Tenant))
		require.NotEmpty(t, id.Name)
		require.NoError(t, agent.ValidateID("name", id.Name))
		require.LessOrEqual(t, len(id.Roles), agent.MaxCallerRoles)
		for _, r := range id.Roles {
			require.True(t, agent.ValidRole(r), r)
		}
	})
}
