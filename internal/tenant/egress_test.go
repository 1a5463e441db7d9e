package tenant

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

// kindsUnder is the built-in tool kinds under an operator's egress policy
// (nil: the default policy).
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

// TestNarrowedEgressReusesNoConnection: a tenant's client keeps idle
// connections to the APIs it calls (egress.Client), and a catalog change
// that takes an API off the tenant's allowlist must not leave it one to
// reach the API through: the next settings' client refuses the call, and
// the API sees no request.
func TestNarrowedEgressReusesNoConnection(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var requests, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	op := opening(t, "127.0.0.0/8")
	apply := func(egressEntries string) {
		cat, err := catalog.Parse(kindsUnder(t, op), "t.yaml", []byte("tenant: demo\negress: "+egressEntries+"\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"))
		require.NoError(t, err)
		_, err = st.ApplyCatalog(ctx, cat, false)
		require.NoError(t, err)
	}
	c := NewCache(st, op, zap.NewNop())
	call := func() error {
		s, err := c.Settings(ctx, "demo")
		require.NoError(t, err)
		resp, err := s.HTTP.Get(srv.URL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}

	apply(`["` + host + `"]`)
	for range 3 {
		require.NoError(t, call())
	}
	require.Equal(t, int64(1), conns.Load(), "the calls share one kept connection")

	apply("[api.example.com]")
	c.Invalidate("demo")
	err = call()
	require.ErrorContains(t, err, "egress")
	require.Equal(t, int64(3), requests.Load(), "the API saw nothing after its removal")
}
