package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func TestParseTokens(t *testing.T) {
	hash := sha256.Sum256([]byte("s3cret"))
	got, err := ParseTokens(" a=demo, b=acme:approver+user:ana , sha256:" + hex.EncodeToString(hash[:]) + "=demo:admin:ops, c=acme:user+supervisor:bo")
	require.NoError(t, err)
	require.Len(t, got, 4)

	require.Equal(t, "demo", got[0].Tenant)
	require.Equal(t, []Role{RoleUser}, got[0].Roles, "a token without roles may only use turns")
	require.Regexp(t, `^token-[0-9a-f]{8}$`, got[0].Name)
	require.True(t, got[0].matches(sha256.Sum256([]byte("a"))))

	require.Equal(t, Token{Tenant: "acme", Name: "ana", Roles: []Role{RoleApprover, RoleUser}, Issuer: agent.IssuerStaticToken, Subject: "ana",
		hash: sha256.Sum256([]byte("b"))}, got[1])

	require.Equal(t, "ops", got[2].Name)
	require.True(t, got[2].matches(hash), "a hashed entry accepts its token")
	require.False(t, got[2].matches(sha256.Sum256([]byte("sha256:"+hex.EncodeToString(hash[:])))), "not the hash itself")
	require.Equal(t, hex.EncodeToString(hash[:]), got[2].Hash())

	// A role of the tenant's own opens nothing of the API; policies and
	// rules read it from the caller.
	require.Equal(t, []Role{RoleUser, "supervisor"}, got[3].Roles)
	require.False(t, got[3].Has(RoleApprover))
	require.Equal(t, &agent.Caller{Name: "bo", Roles: []string{"user", "supervisor"}, Issuer: agent.IssuerStaticToken, Subject: "bo"}, got[3].Caller())

	for _, tt := range []struct{ spec, want string }{
		{"a", "want <token>=<tenant>"},
		{"=demo", "want <token>=<tenant>"},
		{"a=", "want <token>=<tenant>"},
		{"a=de mo", `want a valid tenant id`},
		{"a=demo:Root", `role "Root": want lower-case letters`},
		{"a=demo:user+", `role "": want lower-case letters`},
		{"a=demo:us er", `role "us er": want lower-case letters`},
		{"a=demo:user:an a", `may not contain spaces`},
		{"sha256:abc=demo", "sha256: wants 64 hex digits"},
	} {
		_, err := ParseTokens(tt.spec)
		require.ErrorContains(t, err, tt.want, tt.spec)
		require.ErrorContains(t, err, "AGENTFLOW_TOKENS", tt.spec)
	}
}

// TestEveryMethodHasARole: a method without a role is refused to every
// token, so each one the services offer must have one.
// TestPrincipal: a caller is known by its tenant, issuer and subject, so
// that an identity provider's user whose name is a static token's is
// another caller, and so is the same name in another tenant or from
// another issuer.
func TestPrincipal(t *testing.T) {
	static, err := NewToken("s", "acme", "aap", RoleApprover)
	require.NoError(t, err)
	oidc := Token{Tenant: "acme", Name: "aap", Roles: []Role{RoleApprover}, Issuer: "https://idp.example", Subject: "00u1"}
	for _, other := range []Token{
		oidc,
		{Tenant: "acme", Name: "aap", Issuer: "https://other.example", Subject: "00u1"},
		{Tenant: "rival", Name: "aap", Issuer: agent.IssuerStaticToken, Subject: "aap"},
		{Tenant: "acme", Name: "aap", Issuer: "https://idp.example", Subject: "00u2"},
	} {
		require.NotEqual(t, static.Principal(), other.Principal(), "%+v", other)
	}
	again, err := NewToken("t", "acme", "aap", RoleUser)
	require.NoError(t, err)
	require.Equal(t, static.Principal(), again.Principal(), "two static tokens of one name are one holder's")
	renamed := oidc
	renamed.Name = "someone-else"
	require.Equal(t, oidc.Principal(), renamed.Principal(), "the IdP's user, whatever its name claim says")
}

func TestEveryMethodHasARole(t *testing.T) {
	for _, desc := range []grpc.ServiceDesc{pb.AgentService_ServiceDesc, pb.CatalogService_ServiceDesc, pb.EvalService_ServiceDesc} {
		var names []string
		for _, m := range desc.Methods {
			names = append(names, m.MethodName)
		}
		for _, st := range desc.Streams {
			names = append(names, st.StreamName)
		}
		for _, n := range names {
			full := "/" + desc.ServiceName + "/" + n
			_, ok := methodRoles[full]
			require.True(t, ok, "%s has no role in methodRoles", full)
		}
	}
}
