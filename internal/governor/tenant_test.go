package governor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/store"
)

// applyLimits applies a catalog of tenant with model limits (key → limit
// list) and budgets.
func applyLimits(t *testing.T, s *store.Store, tenant string, limits map[string]string, budgets *agent.Budgets) error {
	t.Helper()
	own := map[string]agent.ModelLimits{}
	for key, list := range limits {
		lim, err := agent.ParseModelLimits(list)
		require.NoError(t, err)
		own[key] = lim
	}
	tc := agent.TenantCatalog{TenantID: tenant, ModelLimits: own, ReplaceModelLimits: limits != nil, Budgets: budgets}
	_, err := s.ApplyCatalog(context.Background(), agent.Catalog{Tenants: []agent.TenantCatalog{tc}}, false)
	return err
}

// TestTenantNarrowsModelLimits: a tenant's catalog may narrow the
// operator's limits of a key for its own calls, never widen them (the
// apply is refused naming the field, and nothing is stored); the
// governor holds the tenant's calls to the narrower while another
// tenant's calls go by them under the operator's.
func TestTenantNarrowsModelLimits(t *testing.T) {
	ctx := context.Background()
	operator, err := governor.ParseLimits("openai=requests:100/1m,input_tokens:10000/1m,concurrent:3")
	require.NoError(t, err)
	s, err := store.Open(ctx, devtest.Database(t), store.Options{ModelLimits: operator.Map()})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	for limits, want := range map[string]string{
		"requests:101/1m":       `tenant "acme": model_limits.openai:gpt-4o.requests: 101/1m allows more than the operator's 100/1m; a tenant may only narrow it`,
		"requests:10/1s":        `model_limits.openai:gpt-4o.requests: 10/1s allows more than the operator's 100/1m`,
		"concurrent:4":          `model_limits.openai:gpt-4o.concurrent: 4 allows more than the operator's 3`,
		"input_tokens:20000/2m": `model_limits.openai:gpt-4o.input_tokens: 20000/2m allows more than`,
	} {
		err := applyLimits(t, s, "acme", map[string]string{"openai:gpt-4o": limits}, nil)
		require.ErrorContains(t, err, want, limits)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), limits)
	}
	b, err := s.TenantBilling(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, b.ModelLimits, "a refused catalog stores nothing")

	// Narrower: fewer calls in flight, the same count over a longer
	// window, and a key the operator does not govern.
	require.NoError(t, applyLimits(t, s, "acme", map[string]string{"openai": "concurrent:1,requests:100/2m", "anthropic": "requests:5"}, nil))
	// Budgets set later keep the limits beside them.
	require.NoError(t, applyLimits(t, s, "acme", nil, &agent.Budgets{Day: &agent.Budget{Tokens: 1000}}))
	b, err = s.TenantBilling(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, map[string]agent.ModelLimits{
		"openai":    {Concurrent: 1, Requests: 100, RequestWindow: 2 * time.Minute},
		"anthropic": {Requests: 5, RequestWindow: time.Minute},
	}, b.ModelLimits)
	require.Equal(t, int64(1000), b.Budgets.Day.Tokens)

	g, err := governor.New(governor.Options{Store: s, Limits: operator, Logger: zaptest.NewLogger(t), Poll: 20 * time.Millisecond,
		TenantLimits: func(ctx context.Context, tenant string) (map[string]agent.ModelLimits, error) {
			b, err := s.TenantBilling(ctx, tenant)
			return b.ModelLimits, err
		}})
	require.NoError(t, err)
	acquire := func(ctx context.Context, tenant, id string) (*governor.Permit, error) {
		return g.Acquire(ctx, governor.Call{Model: "openai:gpt-4o", ID: id, TenantID: tenant, Input: 10, Hold: time.Minute})
	}
	// waits says what a call that cannot be admitted waits for.
	waits := func(tenant, id string) governor.Wait {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		var mu sync.Mutex
		var w governor.Wait
		_, err := g.Acquire(ctx, governor.Call{Model: "openai:gpt-4o", ID: id, TenantID: tenant, Input: 10, Hold: time.Minute,
			Waiting: func(got governor.Wait) { mu.Lock(); w = got; mu.Unlock() }})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		mu.Lock()
		defer mu.Unlock()
		return w
	}
	first, err := acquire(ctx, "acme", "a1")
	require.NoError(t, err)
	w := waits("acme", "a2")
	require.Equal(t, "tenant:acme:openai", w.Key, "acme's own concurrent:1")
	require.Equal(t, store.GovernorConcurrent, w.Reason)
	// Another tenant has the operator's three slots, less the one acme holds.
	b1, err := acquire(ctx, "beta", "b1")
	require.NoError(t, err)
	b2, err := acquire(ctx, "beta", "b2")
	require.NoError(t, err)
	w = waits("beta", "b3")
	require.Equal(t, "openai", w.Key, "the operator's concurrent:3")
	require.Equal(t, store.GovernorConcurrent, w.Reason)

	// acme's release frees both its own slot and the operator's.
	first.Done(ctx, &agent.Usage{PromptTokens: 10})
	second, err := acquire(ctx, "acme", "a3")
	require.NoError(t, err)
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_grants WHERE key = 'tenant:acme:openai' AND held_until IS NOT NULL`))
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM governor_grants WHERE key = 'openai' AND held_until IS NOT NULL`))
	for _, p := range []*governor.Permit{second, b1, b2} {
		p.Done(ctx, nil)
	}
	require.Equal(t, 0, count(t, s, `SELECT count(*) FROM governor_grants WHERE held_until IS NOT NULL`))

	// An empty block removes the tenant's own: the operator's apply.
	require.NoError(t, applyLimits(t, s, "acme", map[string]string{}, nil))
	b, err = s.TenantBilling(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, b.ModelLimits)
	require.Equal(t, int64(1000), b.Budgets.Day.Tokens, "the budgets stay")
}
