package mcptool_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/egress"
)

// loopbackOpen is the operator's egress policy of these tests: it opens
// 127.0.0.1, where their servers listen, as AGENTFLOW_EGRESS_ALLOW would;
// the default policy keeps loopback closed whatever a tenant lists.
func loopbackOpen(t testing.TB) *egress.Operator {
	t.Helper()
	o, err := egress.OpenOperator("127.0.0.1")
	require.NoError(t, err)
	return o
}
