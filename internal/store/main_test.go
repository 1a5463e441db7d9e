package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// open returns a store on a new empty database.
func open(t *testing.T, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), devtest.Database(t), opts)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// count runs a SELECT count(*) query.
func count(t *testing.T, s *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// requireCode asserts that err carries the domain error code.
func requireCode(t *testing.T, err error, code agent.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, agent.ErrorCode(err), "error: %v", err)
}
