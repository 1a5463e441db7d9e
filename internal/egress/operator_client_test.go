package egress_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/egress"
)

// openEverything is an operator that opens every address but metadata
// ones, so that the tenant's entries decide.
func openEverything(t *testing.T) *egress.Operator {
	t.Helper()
	o, err := egress.OpenOperator("0.0.0.0/0", "::/0")
	require.NoError(t, err)
	return o
}

// TestOperatorClient calls real servers on loopback through clients under
// several operator policies: the default opens none of them whatever the
// tenant lists; an opened address works; the platform's own port stays
// closed even under an opened CIDR, and is never connected to.
func TestOperatorClient(t *testing.T) {
	api := serve(t, "127.0.0.1:0", hello)
	platform := serve(t, "127.0.0.1:0", hello) // stands for the Temporal frontend's HTTP API
	ctx := context.Background()
	open, err := egress.NewOperator(ctx, egress.OperatorConfig{
		Allow:    []string{"127.0.0.0/8"},
		Platform: []egress.PlatformAddr{{Addr: platform.Listener.Addr().String(), What: "the Temporal frontend's HTTP API", From: "test"}},
	})
	require.NoError(t, err)
	exact, err := egress.OpenOperator(api.Listener.Addr().String())
	require.NoError(t, err)
	byName, err := egress.OpenOperator("localhost:" + api.port)
	require.NoError(t, err)

	tests := []struct {
		name    string
		op      *egress.Operator
		entries []string
		url     string
		want    string // "" when allowed
	}{
		{"default operator", nil, []string{"127.0.0.0/8"}, "http://127.0.0.1:{api}/",
			"address 127.0.0.1 is a loopback address (127.0.0.0/8), which the operator's egress policy does not open (AGENTFLOW_EGRESS_ALLOW)"},
		{"opened cidr", open, []string{"127.0.0.1:{api}"}, "http://127.0.0.1:{api}/", ""},
		{"opened exactly", exact, []string{"127.0.0.1:{api}"}, "http://127.0.0.1:{api}/", ""},
		{"opened exactly, another port", exact, []string{"127.0.0.1"}, "http://127.0.0.1:{platform}/", "which the operator's egress policy does not open"},
		{"opened by name", byName, []string{"localhost:{api}"}, "http://localhost:{api}/", ""},
		{"opened by name, not by address", byName, []string{"127.0.0.1:{api}"}, "http://127.0.0.1:{api}/", "which the operator's egress policy does not open"},
		{"platform port under an opened cidr", open, []string{"127.0.0.0/8"}, "http://127.0.0.1:{platform}/",
			"address 127.0.0.1:{platform} is the Temporal frontend's HTTP API, a port of the platform's own, which no egress policy opens"},
		{"platform port listed exactly", open, []string{"127.0.0.1:{platform}"}, "http://127.0.0.1:{platform}/", "the Temporal frontend's HTTP API"},
		{"platform port by localhost", open, []string{"localhost", "127.0.0.0/8"}, "http://localhost:{platform}/", "the Temporal frontend's HTTP API"},
		{"platform port at another loopback address", open, []string{"127.0.0.0/8"}, "http://127.0.0.2:{platform}/", "the Temporal frontend's HTTP API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReplacer("{api}", api.port, "{platform}", platform.port)
			entries := make([]string, len(tt.entries))
			for i, e := range tt.entries {
				entries[i] = r.Replace(e)
			}
			p, err := egress.ParsePolicy(entries)
			require.NoError(t, err)
			p.Tenant = "demo"
			c := tt.op.Client(p)
			t.Cleanup(c.CloseIdleConnections)
			before := platform.conns.Load()
			body, err := get(c, r.Replace(tt.url))
			require.Equal(t, before, platform.conns.Load(), "the platform's port is never connected to")
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, "hello", body)
				return
			}
			requireRefused(t, err, r.Replace(tt.want))
		})
	}
}
