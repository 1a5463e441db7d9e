package server

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/testissuer"
)

// TestOIDCIssuerDownFailsStart: a gateway whose OIDC issuer cannot be
// reached does not start — as when PostgreSQL or Temporal cannot be —
// and says which issuer, which variable and why; it leaves no listener
// behind. With the issuer up it starts.
func TestOIDCIssuerDownFailsStart(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	iss := testissuer.Start(t)
	cfg := Config{
		TemporalAddress: address, Namespace: namespace, TaskQueue: "oidc-start", DatabaseURL: devtest.Database(t),
		HTTPAddr: "off", HTTPAPIAddr: "off", Roles: []string{RoleGateway}, GRPCAddr: "127.0.0.1:0",
		OIDC: &oidcauth.Config{Issuer: iss.URL, Audience: "agentflow", Tenant: "demo"},
	}
	srv, err := New(context.Background(), cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	srv.Close()

	// Another port, where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	grpcAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	iss.Close()
	cfg.GRPCAddr = grpcAddr
	_, err = New(context.Background(), cfg, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "OIDC issuer "+iss.URL+" (AGENTFLOW_OIDC_ISSUER): discovery: ")
	require.ErrorContains(t, err, "connection refused")
	ln, err = net.Listen("tcp", grpcAddr)
	require.NoError(t, err, "the gateway's port was released")
	require.NoError(t, ln.Close())
}
