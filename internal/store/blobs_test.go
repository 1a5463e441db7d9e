package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestTenantBlobInfo: a tenant's blob is described by the type it was
// first stored with and its size, without its bytes; another tenant's
// ref, an unknown one and a malformed one are refused as TenantBlob
// refuses them.
func TestTenantBlobInfo(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	ref, err := s.PutTenantBlob(ctx, "demo", png, "image/png")
	require.NoError(t, err)
	_, err = s.PutTenantBlob(ctx, "demo", png, "text/plain")
	require.NoError(t, err)
	info, err := s.TenantBlobInfo(ctx, "demo", ref)
	require.NoError(t, err)
	require.Equal(t, store.BlobInfo{Ref: ref, ContentType: "image/png", Size: int64(len(png))}, info, "the first type stands")

	for _, tc := range []struct {
		name, tenant, ref string
		code              agent.Code
	}{
		{"another tenant", "acme", ref, agent.CodeNotFound},
		{"nothing stored", "demo", "cas://sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", agent.CodeNotFound},
		{"malformed", "demo", "cas://sha256:XYZ", agent.CodeInvalid},
		{"no tenant", "", ref, agent.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.TenantBlobInfo(ctx, tc.tenant, tc.ref)
			requireCode(t, err, tc.code)
		})
	}
}
