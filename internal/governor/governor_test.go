package governor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// open returns a store on a new empty database.
func open(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// call is a governed call of tenant to key "k".
func call(tenant, id string) store.GovernorCall {
	return store.GovernorCall{Key: "k", CallID: id, TenantID: tenant, Priority: 3, Hold: time.Minute, Alive: time.Minute}
}

func admit(t *testing.T, s *store.Store, lim store.GovernorLimits, c store.GovernorCall) store.Admission {
	t.Helper()
	adm, err := s.Admit(context.Background(), lim, c)
	require.NoError(t, err)
	return adm
}

func count(t *testing.T, s *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// TestAdmitRequestWindow: a window admits its limit of calls; the next
// waits, told when the window's oldest call leaves it; a retried
// admission of an admitted call is admitted again and counted once.
func TestAdmitRequestWindow(t *testing.T) {
	s := open(t)
	lim := store.GovernorLimits{Requests: 3, RequestWindow: time.Hour}
	for i := range 3 {
		require.True(t, admit(t, s, lim, call("a", fmt.Sprint(i))).Granted, "call %d", i)
	}
	adm := admit(t, s, lim, call("a", "3"))
	require.False(t, adm.Granted)
	require.Equal(t, store.GovernorRequests, adm.Reason)
	require.InDelta(t, time.Hour.Seconds(), adm.Retry.Seconds(), 60)
	require.Equal(t, 0, adm.Ahead)

	require.True(t, admit(t, s, lim, call("a", "1")).Granted, "a retried admission")
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM governor_grants`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_waiters`), "call 3 waits")
}

// TestAdmitFairAmongTenants: with one slot, a tenant with many calls
// waiting takes turns with a tenant with one: the tenant with fewer
// recent grants goes first, then arrival order.
func TestAdmitFairAmongTenants(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lim := store.GovernorLimits{Concurrent: 1}
	require.True(t, admit(t, s, lim, call("a", "a0")).Granted)
	for _, id := range []string{"a1", "a2", "a3"} {
		adm := admit(t, s, lim, call("a", id))
		require.Equal(t, store.GovernorConcurrent, adm.Reason, id)
	}
	require.Equal(t, store.GovernorConcurrent, admit(t, s, lim, call("b", "b1")).Reason)

	in, out := int64(10), int64(5)
	require.NoError(t, s.Settle(ctx, "k", "a0", &in, &out))
	adm := admit(t, s, lim, call("a", "a1"))
	require.Equal(t, store.Admission{Reason: store.GovernorQueue, Ahead: 1}, adm, "b1 goes first: tenant a had a grant")
	require.True(t, admit(t, s, lim, call("b", "b1")).Granted)

	require.NoError(t, s.Settle(ctx, "k", "b1", &in, &out))
	require.Equal(t, store.Admission{Reason: store.GovernorQueue, Ahead: 1}, admit(t, s, lim, call("a", "a2")), "then a1, the oldest")
	require.True(t, admit(t, s, lim, call("a", "a1")).Granted)
}

// TestAdmitUnansweredCountsNoShare: a call that ended without an answer
// (a 429, a failure) still filled its key's request window but does not
// count toward its tenant's recent grants: a tenant whose call the
// provider refused is not served later for it.
func TestAdmitUnansweredCountsNoShare(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lim := store.GovernorLimits{Concurrent: 1, Requests: 100, RequestWindow: time.Hour}
	require.True(t, admit(t, s, lim, call("b", "b0")).Granted)
	in, out := int64(10), int64(5)
	require.NoError(t, s.Settle(ctx, "k", "b0", &in, &out))
	require.True(t, admit(t, s, lim, call("a", "a0")).Granted)
	require.Equal(t, store.GovernorConcurrent, admit(t, s, lim, call("b", "b1")).Reason)
	require.Equal(t, store.GovernorConcurrent, admit(t, s, lim, call("a", "a1")).Reason)

	require.NoError(t, s.Settle(ctx, "k", "a0", nil, nil), "refused")
	require.Equal(t, store.Admission{Reason: store.GovernorQueue, Ahead: 1}, admit(t, s, lim, call("b", "b1")),
		"a1 goes first: tenant b had an answer, tenant a none")
	require.True(t, admit(t, s, lim, call("a", "a1")).Granted)
	require.Equal(t, 3, count(t, s, `SELECT count(*) FROM governor_grants WHERE key = 'k'`), "the refused call filled the request window")
}

// TestAdmitPriority: a call of a higher priority (a lower number) that
// arrived later goes first.
func TestAdmitPriority(t *testing.T) {
	s := open(t)
	lim := store.GovernorLimits{Concurrent: 1}
	require.True(t, admit(t, s, lim, call("a", "held")).Granted)
	require.Equal(t, store.GovernorConcurrent, admit(t, s, lim, call("a", "low")).Reason)
	urgent := call("a", "urgent")
	urgent.Priority = 1
	adm := admit(t, s, lim, urgent)
	require.Equal(t, store.GovernorConcurrent, adm.Reason)
	require.Equal(t, 0, adm.Ahead)
	require.NoError(t, s.Settle(context.Background(), "k", "held", nil, nil))
	require.Equal(t, store.Admission{Reason: store.GovernorQueue, Ahead: 1}, admit(t, s, lim, call("a", "low")))
	require.True(t, admit(t, s, lim, urgent).Granted)
}

// TestAdmitTokens: a call whose worst case does not fit the input window
// waits; settling an admitted call to its real usage makes room; a call
// larger than the whole limit passes alone in an empty window.
func TestAdmitTokens(t *testing.T) {
	s := open(t)
	lim := store.GovernorLimits{InputTokens: 100, InputWindow: time.Hour, OutputTokens: 1000, OutputWindow: time.Hour}
	first := call("a", "first")
	first.Input, first.Output = 60, 500
	require.True(t, admit(t, s, lim, first).Granted)
	second := call("a", "second")
	second.Input, second.Output = 60, 500
	adm := admit(t, s, lim, second)
	require.Equal(t, store.GovernorInputTokens, adm.Reason)
	require.Positive(t, adm.Retry)

	in, out := int64(10), int64(20)
	require.NoError(t, s.Settle(context.Background(), "k", "first", &in, &out))
	require.True(t, admit(t, s, lim, second).Granted, "10 + 60 fit in 100")

	huge := call("b", "huge")
	huge.Input = 5000
	require.Equal(t, store.GovernorInputTokens, admit(t, s, lim, huge).Reason)
	alone := store.GovernorLimits{InputTokens: 100, InputWindow: time.Hour}
	huge.Key = "empty"
	require.True(t, admit(t, s, alone, huge).Granted, "a call larger than the limit, alone")
}

// TestPauseKey: a provider's request to wait stops the key admitting,
// for the whole fleet; a shorter pause does not shorten a longer one.
func TestPauseKey(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lim := store.GovernorLimits{Requests: 100, RequestWindow: time.Minute}
	require.True(t, admit(t, s, lim, call("a", "before")).Granted)
	require.NoError(t, s.PauseKey(ctx, "k", time.Hour))
	require.NoError(t, s.PauseKey(ctx, "k", time.Second))
	adm := admit(t, s, lim, call("a", "after"))
	require.Equal(t, store.GovernorPaused, adm.Reason)
	require.InDelta(t, time.Hour.Seconds(), adm.Retry.Seconds(), 60)
	require.Error(t, s.PauseKey(ctx, "k", 0))
}

// TestAdmitRefusesBadCalls: what the tables cannot take is refused
// before any query.
func TestAdmitRefusesBadCalls(t *testing.T) {
	s := open(t)
	for _, c := range []store.GovernorCall{
		{CallID: "x", TenantID: "a", Hold: time.Second, Alive: time.Second},
		{Key: "k", CallID: "x", TenantID: "a", Input: -1, Hold: time.Second, Alive: time.Second},
		{Key: "k", CallID: "x", TenantID: "a", Alive: time.Second},
	} {
		_, err := s.Admit(context.Background(), store.GovernorLimits{}, c)
		require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "%v", err)
	}
}

// TestAcquireWaitsAndGivesUpWithItsContext: a call over the limit waits,
// says what for, and when its context ends it is withdrawn from the
// queue; the waiting calls are counted.
func TestAcquireWaitsAndGivesUpWithItsContext(t *testing.T) {
	s := open(t)
	limits, err := governor.ParseLimits("openai=requests:1/1h")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	g, err := governor.New(governor.Options{Store: s, Limits: limits, Logger: zaptest.NewLogger(t), Metrics: reg})
	require.NoError(t, err)
	ctx := context.Background()

	p, err := g.Acquire(ctx, governor.Call{Model: "openai:gpt-4o", ID: "first", TenantID: "a", Hold: time.Minute})
	require.NoError(t, err)
	require.NotNil(t, p)
	p.Done(ctx, &agent.Usage{PromptTokens: 12, CompletionTokens: 3})

	none, err := g.Acquire(ctx, governor.Call{Model: "anthropic:claude", ID: "x", TenantID: "a", Hold: time.Minute})
	require.NoError(t, err)
	require.Nil(t, none, "an ungoverned model")
	none.Done(ctx, nil)

	var mu sync.Mutex
	var waits []governor.Wait
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := g.Acquire(wctx, governor.Call{Model: "openai:gpt-4o", ID: "second", TenantID: "a", Hold: time.Minute,
			Waiting: func(w governor.Wait) { mu.Lock(); waits = append(waits, w); mu.Unlock() }})
		done <- err
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(waits) > 0 && gauge(t, reg, governor.MetricWaitingCalls) == 1
	}, 10*time.Second, 20*time.Millisecond)
	mu.Lock()
	require.Equal(t, "openai", waits[0].Key)
	require.Equal(t, store.GovernorRequests, waits[0].Reason)
	require.Contains(t, waits[0].String(), "waiting for openai: its requests are at the limit (0 calls ahead")
	mu.Unlock()
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_waiters WHERE call_id = 'second'`))

	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "waiting for openai")
	require.Equal(t, 0, count(t, s, `SELECT count(*) FROM governor_waiters`), "withdrawn")
	require.Zero(t, gauge(t, reg, governor.MetricWaitingCalls))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_grants WHERE input_tokens = 12 AND output_tokens = 3 AND held_until IS NULL`),
		"the first call settled to its usage")

	g.Refused(ctx, "openai:gpt-4o", time.Hour)
	require.Equal(t, 1.0, counter(t, reg, governor.MetricPauses))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_keys WHERE key = 'openai' AND paused_until > now() + interval '50 minutes'`))
}

// TestAcquireNoWait: a call that asks not to wait is admitted when its
// keys have room, and otherwise refused at once with what it would wait
// for, leaving nothing behind: no place in the queue, and no grant of the
// tenant's own key that admitted it before the operator's refused it.
func TestAcquireNoWait(t *testing.T) {
	s := open(t)
	limits, err := governor.ParseLimits("openai=requests:1/1h")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	g, err := governor.New(governor.Options{Store: s, Limits: limits, Logger: zaptest.NewLogger(t), Metrics: reg,
		TenantLimits: func(context.Context, string) (map[string]agent.ModelLimits, error) {
			return map[string]agent.ModelLimits{"openai": {Requests: 10, RequestWindow: time.Hour}}, nil
		}})
	require.NoError(t, err)
	ctx := context.Background()
	noWait := func(id string) (*governor.Permit, error) {
		return g.Acquire(ctx, governor.Call{Model: "openai:gpt-4o", ID: id, TenantID: "a", Hold: time.Minute, NoWait: true})
	}

	p, err := noWait("first")
	require.NoError(t, err)
	require.NotNil(t, p)
	_, err = noWait("second")
	var ww *governor.WouldWait
	require.ErrorAs(t, err, &ww)
	require.Equal(t, "openai", ww.Wait.Key)
	require.Equal(t, store.GovernorRequests, ww.Wait.Reason)
	require.Contains(t, err.Error(), "waiting for openai: its requests are at the limit")
	require.Zero(t, count(t, s, `SELECT count(*) FROM governor_waiters`), "not queued")
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM governor_grants WHERE key = 'tenant:a:openai'`),
		"the tenant's own grant of the unsent call revoked")
	require.Zero(t, gauge(t, reg, governor.MetricWaitingCalls))
	p.Done(ctx, &agent.Usage{PromptTokens: 1})
}

// TestAcquireSharedByTwoGovernors: two governors on their own
// connection pools, as two worker processes, share one count: of calls
// started together, no more than the limit are admitted in a window.
func TestAcquireSharedByTwoGovernors(t *testing.T) {
	dbURL := devtest.Database(t)
	limits, err := governor.ParseLimits("openai=requests:4/1s")
	require.NoError(t, err)
	var govs []*governor.Governor
	for range 2 {
		s, err := store.Open(context.Background(), dbURL, store.Options{})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		g, err := governor.New(governor.Options{Store: s, Limits: limits, Logger: zaptest.NewLogger(t), Poll: 20 * time.Millisecond})
		require.NoError(t, err)
		govs = append(govs, g)
	}
	var mu sync.Mutex
	var admitted []time.Time
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			p, err := govs[i%2].Acquire(context.Background(), governor.Call{Model: "openai:m", ID: fmt.Sprint(i), TenantID: "a", Hold: time.Minute})
			if !(assertNoError(t, err)) {
				return
			}
			mu.Lock()
			admitted = append(admitted, time.Now())
			mu.Unlock()
			p.Done(context.Background(), nil)
		})
	}
	wg.Wait()
	require.Len(t, admitted, 12)
	// The database's grant times: each call's fifth-later one is a window
	// (and the margin) after it.
	st, err := store.Open(context.Background(), dbURL, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	rows, err := st.Pool().Query(context.Background(), `SELECT granted_at FROM governor_grants ORDER BY granted_at`)
	require.NoError(t, err)
	var times []time.Time
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		times = append(times, at)
	}
	require.NoError(t, rows.Err())
	require.Len(t, times, 12)
	for i := 0; i+4 < len(times); i++ {
		require.GreaterOrEqual(t, times[i+4].Sub(times[i]), time.Second+governor.DispatchMargin, "grants %d and %d", i, i+4)
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("acquire: %v", err)
		return false
	}
	return true
}

// counter is the sum of a counter's series in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// gauge is the sum of a gauge's series in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
