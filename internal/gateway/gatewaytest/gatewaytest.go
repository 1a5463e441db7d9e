// Package gatewaytest serves the gateway's HTTP API in tests of the core
// and of its doors.
//
// Only tests import it; it imports the core and no door, so that every
// door's tests can use it.
package gatewaytest

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/gateway"
)

// StartHTTPAPI serves the HTTP API of a gateway with no backends, with
// doors beside it: what a test sends this way is refused before any call
// reaches the services. The token "tok" is demo's alice, with every role.
func StartHTTPAPI(t testing.TB, doors []gateway.Door, origins ...string) *httptest.Server {
	t.Helper()
	tok, err := gateway.NewToken("tok", "demo", "alice", gateway.AllRoles()...)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	api, err := gateway.NewHTTPAPI(svc, gateway.NewCatalogService(nil, nil, nil, zaptest.NewLogger(t)), gateway.HTTPOptions{CORSOrigins: origins, Doors: doors})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- api.Serve() }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Stop(0)
		require.NoError(t, <-done)
	})
	return srv
}
