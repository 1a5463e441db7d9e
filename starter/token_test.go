package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/gateway"
)

// TestTokenNew: the printed entry names the printed token by its hash,
// with the tenant, roles and name asked for.
func TestTokenNew(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"token", "new", "--tenant", "acme", "--roles", "user,approver", "--name", "ana"}, &out))
	m := regexp.MustCompile(`(?s)^token \(shown once; give it to ana\):\n  (af_\S+)\nAGENTFLOW_TOKENS entry \(holds only its hash\):\n  (sha256:[0-9a-f]{64}=acme:user\+approver:ana)\n$`).
		FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	secret, entry := m[1], m[2]
	require.NotContains(t, entry, secret)

	toks, err := gateway.ParseTokens(entry)
	require.NoError(t, err)
	want, err := gateway.NewToken(secret, "acme", "ana", gateway.RoleUser, gateway.RoleApprover)
	require.NoError(t, err)
	require.Equal(t, want, toks[0], "the entry accepts the token")

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"token", "new", "--tenant", "acme", "--roles", "user,supervisor", "--name", "bo"}, &out))
	require.Contains(t, out.String(), "=acme:user+supervisor:bo\n", "a role of the tenant's own, for policies")

	err = run(context.Background(), []string{"token", "new", "--tenant", "acme", "--roles", "Root"}, &out)
	require.ErrorContains(t, err, `role "Root": want lower-case letters`)
	err = run(context.Background(), []string{"token", "new"}, &out)
	require.ErrorContains(t, err, "want a valid tenant id")
}

// TestCancelUnknownTurn: cancel goes through the gateway and says what is
// wrong.
func TestCancelUnknownTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := startGateway(t).GRPCAddr()
	_, err := starter(ctx, addr, demoToken, "cancel", "--stream", "turn/demo/nothing")
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = starter(ctx, addr, demoToken, "cancel")
	require.ErrorContains(t, err, "--stream is required")
}
