package catalog

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools"
)

// kindsUnder is testKinds under an operator's egress policy.
func kindsUnder(t *testing.T, op *egress.Operator) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
	require.NoError(t, err)
	return r
}

// opening is an operator's egress policy that opens entries.
func opening(t *testing.T, entries ...string) *egress.Operator {
	t.Helper()
	op, err := egress.OpenOperator(entries...)
	require.NoError(t, err)
	return op
}

// TestEgressUnderOperator: a catalog's egress entries are checked against
// the operator's policy of the kinds' Deps, each problem with its file and
// line, every entry in one load.
func TestEgressUnderOperator(t *testing.T) {
	op, err := egress.NewOperator(context.Background(), egress.OperatorConfig{
		Allow:    []string{"127.0.0.0/8", "10.1.0.0/16"},
		Platform: []egress.PlatformAddr{{Addr: "127.0.0.1:7243", What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"}},
	})
	require.NoError(t, err)
	src := `tenant: demo
egress:
  - api.example.com
  - 127.0.0.1:8089
  - 127.0.0.1:7243
  - 10.1.2.0/24
  - 10.0.0.0/8
  - 169.254.169.254
  - 0.0.0.0/0
`
	_, err = Parse(kindsUnder(t, op), "t.yaml", []byte(src))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	var got []string
	for _, p := range verr.Problems {
		got = append(got, p.String())
	}
	require.Equal(t, []string{
		`t.yaml:5: egress[2]: egress entry "127.0.0.1:7243": 127.0.0.1 is a loopback address and port 7243 is the Temporal frontend's HTTP API; the platform's own ports stay closed whatever the operator opens (AGENTFLOW_EGRESS_ALLOW)`,
		`t.yaml:7: egress[4]: egress entry "10.0.0.0/8": every address of 10.0.0.0/8 is a private address (10.0.0.0/8); the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)`,
		`t.yaml:8: egress[5]: egress entry "169.254.169.254": 169.254.169.254 is a cloud metadata address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)`,
		`t.yaml:9: egress[6]: egress entry "0.0.0.0/0": 0.0.0.0/0 includes 0.0.0.0/8, where every address is an unspecified (this-network) address; the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)`,
	}, got)

	// Under the default policy (no operator configured) loopback is refused too.
	_, err = Parse(testKinds(t), "t.yaml", []byte("tenant: demo\negress: [api.example.com, \"127.0.0.0/8\"]\n"))
	require.EqualError(t, err, `t.yaml:2: egress[1]: egress entry "127.0.0.0/8": every address of 127.0.0.0/8 is a loopback address (127.0.0.0/8); the operator has not opened all of it (AGENTFLOW_EGRESS_ALLOW)`)
}
