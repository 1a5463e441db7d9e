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

	require.Equal(t, Token{Tenant: "acme", Name: "ana", Roles: []Role{RoleApprover, RoleUser}, hash: sha256.Sum256([]byte("b"))}, got[1])

	require.Equal(t, "ops", got[2].Name)
	require.True(t, got[2].matches(hash), "a hashed entry accepts its token")
	require.False(t, got[2].matches(sha256.Sum256([]byte("sha256:"+hex.EncodeToString(hash[:])))), "not the hash itself")
	require.Equal(t, hex.EncodeToString(hash[:]), got[2].Hash())

	// A role of the tenant's own opens nothing of the API; policies and
	// rules read it from the caller.
	require.Equal(t, []Role{RoleUser, "supervisor"}, got[3].Roles)
	require.False(t, got[3].Has(RoleApprover))
	require.Equal(t, &agent.Caller{Name: "bo", Roles: []string{"user", "supervisor"}}, got[3].Caller())

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
func TestEveryMethodHasARole(t *testing.T) {
	for _, desc := range []grpc.ServiceDesc{pb.AgentService_ServiceDesc, pb.CatalogService_ServiceDesc} {
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
