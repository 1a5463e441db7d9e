package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestHealthzTemporalDown: with nothing listening where Temporal should
// be, /healthz answers 503 naming Temporal, and the live path (which only
// needs Postgres) as degraded until its listener connects.
func TestHealthzTemporalDown(t *testing.T) {
	ctx := context.Background()
	logger := zaptest.NewLogger(t)
	st, err := store.Open(ctx, devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	defer st.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	require.NoError(t, ln.Close())
	c, err := client.NewLazyClient(client.Options{HostPort: down, Logger: SDKLogger(logger)})
	require.NoError(t, err)
	defer c.Close()
	ks, err := knowledge.New(ctx, st.Pool(), knowledge.Options{})
	require.NoError(t, err)
	s := &Server{logger: logger, store: st, client: c, hub: pglive.NewHub(st.Pool(), logger), knowledge: ks}

	rec := httptest.NewRecorder()
	s.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	var h health
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
	require.Equal(t, "unavailable", h.Status)
	require.Len(t, h.Checks, 3)
	require.Equal(t, []string{"postgres", "ok"}, []string{h.Checks[0].Name, h.Checks[0].Status})
	require.Equal(t, []string{"temporal", "unavailable"}, []string{h.Checks[1].Name, h.Checks[1].Status})
	require.NotEmpty(t, h.Checks[1].Error)
	require.Equal(t, []string{"live_path", "degraded"}, []string{h.Checks[2].Name, h.Checks[2].Status})
	require.Equal(t, knowledge.IndexExact, h.KnowledgeIndex, "Debian's PostgreSQL has no pgvector")
}
