package tenant

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const cacheCatalog = `
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: %s
`

// TestCacheLoadsOnce: a tenant's settings are loaded once and served from
// memory after that; callers that miss at once — a cold process, or the
// turns waiting after a catalog change — share one load; and a caller
// after a change gets the new catalog, never the load from before it.
func TestCacheLoadsOnce(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	apply := func(prompt string) {
		cat, err := catalog.Parse(kindsUnder(t, nil), "t.yaml", []byte(fmt.Sprintf(cacheCatalog, prompt)))
		require.NoError(t, err)
		_, err = st.ApplyCatalog(ctx, cat, false)
		require.NoError(t, err)
	}
	apply("Be brief.")
	op, err := egress.OpenOperator()
	require.NoError(t, err)
	c := NewCache(st, op, zap.NewNop())
	c.Metrics = NewMetrics(prometheus.NewRegistry())
	loads := func() uint64 {
		var m dto.Metric
		require.NoError(t, c.Metrics.reload.Write(&m))
		return m.GetHistogram().GetSampleCount()
	}
	concurrently := func(n int) []*Settings {
		out := make([]*Settings, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				s, err := c.Settings(ctx, "demo")
				require.NoError(t, err)
				out[i] = s
			})
		}
		close(start)
		wg.Wait()
		return out
	}

	cold := concurrently(32)
	require.Equal(t, uint64(1), loads(), "32 callers of a cold cache, one load")
	for _, s := range cold {
		require.Same(t, cold[0], s)
	}
	require.Equal(t, "assistant", cold[0].DefaultAgent)

	again, err := c.Settings(ctx, "demo")
	require.NoError(t, err)
	require.Same(t, cold[0], again, "served from memory")
	require.Equal(t, uint64(1), loads())

	apply("Be thorough.")
	c.Invalidate("demo")
	after := concurrently(32)
	require.Equal(t, uint64(2), loads(), "one load after the change")
	require.Greater(t, after[0].Version, cold[0].Version, "the catalog after the change")
	for _, s := range after {
		require.Same(t, after[0], s)
	}
}
