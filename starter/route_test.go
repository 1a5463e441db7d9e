package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRouteDryRunThroughGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := startGateway(t).GRPCAddr()
	_, err := starter(ctx, addr, demoToken, "catalog", "apply", "-f", "../catalog")
	require.NoError(t, err)

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--page", "ops-console", "restart it"}, "agent ops (rule ops-console, catalog version "},
		// The body's role is the client's word: it routes nowhere a rule
		// over caller.roles guards.
		{[]string{"--role", "operator", "hi"}, "agent assistant (rule default, catalog version "},
		{[]string{"--page", "home", "hi"}, "agent assistant (rule default, catalog version "},
		{[]string{"hi"}, "agent assistant (rule default, catalog version "},
	}
	for _, tt := range tests {
		out, err := starter(ctx, addr, demoToken, append([]string{"route", "--dry-run"}, tt.args...)...)
		require.NoError(t, err, tt.args)
		require.Contains(t, out, tt.want, tt.args)
	}

	// A token whose roles include operator is routed to ops.
	out, err := starter(ctx, addr, operatorToken, "route", "--dry-run", "hi")
	require.NoError(t, err)
	require.Contains(t, out, "agent ops (rule ops-console, catalog version ")

	_, err = starter(ctx, addr, demoToken, "route", "--metadata", "novalue", "hi")
	require.ErrorContains(t, err, "want key=value")
	_, err = starter(ctx, addr, demoToken, "route", "--dry-run=false", "hi")
	require.ErrorContains(t, err, "only --dry-run is supported")
	_, err = starter(ctx, "127.0.0.1:1", demoToken, "route", "hi")
	require.Equal(t, codes.Unavailable, status.Code(err))
}

// TestRouteShowsSkippedRules routes for another tenant, by its token: a
// rule whose condition fails on the request is reported and skipped.
func TestRouteShowsSkippedRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := startGateway(t).GRPCAddr()

	_, err := starter(ctx, addr, acmeToken, "route", "hi")
	require.Equal(t, codes.NotFound, status.Code(err))
	require.EqualError(t, err, `route: tenant "acme" not found`)

	file := filepath.Join(t.TempDir(), "acme.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`tenant: acme
default_agent: a
agents:
  - {id: a, model: "openai:gpt-4o-mini"}
  - {id: b, model: "openai:gpt-4o-mini"}
rules:
  - {name: gold, priority: 1, when: 'metadata.tier == "gold"', agent: b}
`), 0o644))
	_, err = starter(ctx, addr, acmeToken, "catalog", "apply", "-f", file)
	require.NoError(t, err)

	out, err := starter(ctx, addr, acmeToken, "route", "--dry-run", "hi")
	require.NoError(t, err)
	require.Regexp(t, `^rule gold skipped: .*tier.*\nagent a \(rule default, catalog version \d+\)\n$`, out)

	out, err = starter(ctx, addr, acmeToken, "route", "--metadata", "tier=gold", "hi")
	require.NoError(t, err)
	require.Regexp(t, `^agent b \(rule gold, catalog version \d+\)\n$`, out)
}
