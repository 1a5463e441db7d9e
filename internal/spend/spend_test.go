package spend

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/topology"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// perCall is the tokens the provider reports for each call (the usage
// of spendScript): about a call's worst case, its prompt as the worker
// counts it (19 or 20 tokens) and the agent's max_output_tokens, as a
// provider that writes as much as it may would report.
const perCall = 19 + 100

// budgetOf is a budget that allows n calls: n × perCall tokens and half a
// call more, which the next call must not take.
func budgetOf(n int) int64 { return int64(n)*perCall + perCall/2 }

// spendScript answers every call at once with perCall tokens.
const spendScript = `
rules:
  - name: answer
    when: {user: '.'}
    reply: {text: 'Done.', usage: {prompt_tokens: 19, completion_tokens: 100}}
`

// spendCatalog gives a tenant the agent and a day's budget of tokens.
const spendCatalog = `
tenant: %s
agents:
  - id: spender
    model: openai:gpt-4o-mini
    system_prompt: Answer.
    limits: {max_iterations: 2, turn_timeout_sec: 300, max_output_tokens: 100}
budgets:
  day: {tokens: %d}
`

// options are one run's shape.
type options struct {
	tenants []string
	turns   map[string]int // turns started at once, by tenant
	calls   map[string]int // calls each tenant's budget allows, by usage
	limits  string         // the operator's AGENTFLOW_MODEL_LIMITS
	// The provider answers 429 with a Retry-After of retryAfter for
	// stretch, once it has answered stretchAfter calls.
	stretchAfter int
	stretch      time.Duration
	retryAfter   time.Duration
}

// tenantReport is what one tenant's turns did.
type tenantReport struct {
	tenant                 string
	turns, completed       int
	refused                int   // failed BudgetExceeded
	budget                 int64 // tokens
	allowed                int   // calls the budget holds, by usage
	calls                  int64 // in the usage ledger
	tokens                 int64 // in the usage ledger
	overCalls, overTokens  int64
	served                 int // in the contended span
	share, configuredShare float64
}

// report is one run's findings.
type report struct {
	tenants  []tenantReport
	elapsed  time.Duration
	requests int // the provider saw, 429s included
	// The 429 stretch: the requests in it, those of them that were in
	// flight when it began (sent before the first 429 could pause the
	// governed key), how many one request per Retry-After allows beside
	// those, requests that arrived inside a Retry-After window a 429 had
	// opened, and the time from its end to the next answered call.
	inStretch, inFlight, allowed, insideWindow int
	recovery                                   time.Duration
}

// grace is how long after a 429 a request sent before it may still
// arrive: the governor's own bound between an admission and its arrival.
const grace = governor.DispatchMargin

// stack is where a run's turns run: a worker and its Temporal, the
// store of its usage ledger, and the provider.
type stack struct {
	client    client.Client
	taskQueue string
	store     *store.Store
	model     *scripted.Server
}

// devStack is a worker in the test binary on the dev stack
// (internal/testserver).
func devStack(t testing.TB, model *scripted.Server, limits governor.Limits, catalogs []string) stack {
	// The refused turns and the 429s are the point: their logs are noise.
	srv := testserver.Start(t, testserver.Options{SharedModel: model, ModelLimits: limits, Catalogs: catalogs, Logger: zap.NewNop()})
	return stack{client: srv.Client(), taskQueue: srv.TaskQueue, store: srv.Store(), model: model}
}

// productionStack is the production topology (internal/topology): the
// real Temporal server on PostgreSQL and two worker processes that share
// the provider's limits through the database.
func productionStack(t testing.TB, model *scripted.Server, limits string, catalogs []string) stack {
	ctx := context.Background()
	// A folder of its own under the temporary one, which the stack hands
	// to the postgres user (t.TempDir's parent is closed to it).
	dir, err := os.MkdirTemp("", "spend-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	top, err := topology.Start(ctx, topology.Options{Dir: dir, Workers: 2, Gateways: 1, TemporalPort: -1, Logger: zap.NewNop(),
		Env: []string{"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=spend", "AGENTFLOW_SCRIPT=", governor.EnvLimits + "=" + limits,
			"AGENTFLOW_TOKENS=spend=a:user"}}) // the gateway wants one; the harness starts turns on Temporal
	require.NoError(t, err)
	t.Cleanup(func() { _ = top.Stop() })
	st, err := store.Open(ctx, top.DatabaseURL, store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	kinds, err := tools.NewRegistry(tools.Deps{Logger: zap.NewNop()}, tools.Builtin()...)
	require.NoError(t, err)
	require.NoError(t, testserver.ApplyCatalogs(ctx, st, kinds, catalogs...))
	c, err := client.DialContext(ctx, client.Options{HostPort: top.Stack.TemporalAddress, Namespace: top.Stack.Namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return stack{client: c, taskQueue: contract.TaskQueue, store: st, model: model}
}

// run starts every turn at once and reads the ledger and the provider's
// log when they have all ended; production runs it on the production
// topology.
func run(t testing.TB, o options, production bool) report {
	limits, err := governor.ParseLimits(o.limits)
	require.NoError(t, err)
	var catalogs []string
	for _, tenant := range o.tenants {
		catalogs = append(catalogs, fmt.Sprintf(spendCatalog, tenant, budgetOf(o.calls[tenant])))
	}
	script, err := scripted.Parse([]byte(spendScript))
	require.NoError(t, err)
	model, err := scripted.Start("127.0.0.1:0", script, scripted.Options{MaxRecorded: 100000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	var srv stack
	if production {
		srv = productionStack(t, model, o.limits, catalogs)
	} else {
		srv = devStack(t, model, limits, catalogs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The stretch begins once the provider has answered stretchAfter calls.
	var stretchAt time.Time
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if len(srv.model.Requests()) >= o.stretchAfter {
				stretchAt = time.Now()
				srv.model.RefuseFor(o.stretch, int(o.retryAfter/time.Second))
				return
			}
		}
	})

	start := time.Now()
	type turn struct {
		tenant string
		res    agent.TurnResult
		err    error
	}
	var turns []*turn
	var wg sync.WaitGroup
	// The tenants' turns arrive interleaved, as many users' would: the
	// governor's first window is admitted in arrival order, before a queue
	// forms.
	for i := range slices.Max(slices.Collect(maps.Values(o.turns))) {
		for _, tenant := range o.tenants {
			if i >= o.turns[tenant] {
				continue
			}
			tn := &turn{tenant: tenant}
			turns = append(turns, tn)
			wg.Go(func() {
				req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: tenant, AgentID: "spender",
					JobID: fmt.Sprintf("spend-%s-%d-%s", tenant, i, testserver.RandomID()), Prompt: fmt.Sprintf("tenant %s turn %d", tenant, i)}
				r, err := turnclient.Start(ctx, srv.client, srv.taskQueue, req)
				if err != nil {
					tn.err = err
					return
				}
				tn.res, tn.err = turnclient.Result(ctx, r)
			})
		}
	}
	wg.Wait()
	rep := report{elapsed: time.Since(start)}
	close(stop)
	watcher.Wait()

	byTenant := map[string]*tenantReport{}
	for _, tenant := range o.tenants {
		tr := &tenantReport{tenant: tenant, turns: o.turns[tenant], allowed: o.calls[tenant], budget: budgetOf(o.calls[tenant]),
			configuredShare: 1 / float64(len(o.tenants))}
		require.NoError(t, srv.store.Pool().QueryRow(ctx,
			`SELECT count(*), COALESCE(sum(input_tokens + output_tokens), 0)::bigint FROM usage_ledger WHERE tenant_id = $1`, tenant).
			Scan(&tr.calls, &tr.tokens))
		tr.overCalls = max(0, tr.calls-int64(tr.allowed))
		tr.overTokens = max(0, tr.tokens-tr.budget)
		byTenant[tenant] = tr
	}
	for _, tn := range turns {
		require.NoError(t, tn.err, tn.tenant)
		tr := byTenant[tn.tenant]
		switch {
		case tn.res.Status == agent.StatusCompleted:
			tr.completed++
		case tn.res.Error != nil && tn.res.Error.Type == agent.ErrTypeBudget:
			tr.refused++
		default:
			require.Failf(t, "turn neither completed nor refused by its budget", "%s: %+v error %+v", tn.tenant, tn.res, tn.res.Error)
		}
	}

	reqs := srv.model.Requests()
	slices.SortFunc(reqs, func(a, b scripted.Request) int { return a.At.Compare(b.At) })
	rep.requests = len(reqs)
	rep.stretch(reqs, stretchAt, o)
	rep.shares(reqs, byTenant, o.tenants)
	for _, tenant := range o.tenants {
		rep.tenants = append(rep.tenants, *byTenant[tenant])
	}
	return rep
}

// stretch reads the 429 stretch off the provider's log.
func (r *report) stretch(reqs []scripted.Request, at time.Time, o options) {
	if at.IsZero() {
		return
	}
	end := at.Add(o.stretch)
	var first time.Time
	for _, q := range reqs {
		if q.At.Before(at) || !q.At.Before(end) {
			continue
		}
		r.inStretch++
		if first.IsZero() {
			first = q.At
		}
		if q.At.Before(first.Add(grace)) {
			r.inFlight++
		}
	}
	r.allowed = r.inFlight + int(math.Ceil(float64(o.stretch)/float64(o.retryAfter)))
	inside := map[int]bool{}
	for _, refused := range reqs {
		if refused.Status != 429 {
			continue
		}
		for i, q := range reqs {
			if !q.At.Before(refused.At.Add(grace)) && q.At.Before(refused.At.Add(o.retryAfter)) {
				inside[i] = true
			}
		}
	}
	r.insideWindow = len(inside)
	for _, q := range reqs {
		if q.Status == 200 && !q.At.Before(end) {
			r.recovery = q.At.Sub(end)
			break
		}
	}
}

// shares counts each tenant's answered calls while every tenant still
// had calls to make: up to the first tenant's last answered call.
func (r *report) shares(reqs []scripted.Request, by map[string]*tenantReport, tenants []string) {
	last := map[string]time.Time{}
	for _, q := range reqs {
		if q.Status == 200 {
			last[tenantOf(q)] = q.At
		}
	}
	var until time.Time
	for _, tenant := range tenants {
		if at, ok := last[tenant]; ok && (until.IsZero() || at.Before(until)) {
			until = at
		}
	}
	total := 0
	for _, q := range reqs {
		if q.Status == 200 && !q.At.After(until) {
			by[tenantOf(q)].served++
			total++
		}
	}
	for _, tr := range by {
		if total > 0 {
			tr.share = float64(tr.served) / float64(total)
		}
	}
}

// tenantOf reads the tenant off the prompt ("tenant <t> turn <i>").
func tenantOf(q scripted.Request) string {
	for _, m := range slices.Backward(q.Messages) {
		if m.Role == "user" {
			f := strings.Fields(m.Content)
			if len(f) >= 2 {
				return f[1]
			}
		}
	}
	return ""
}

func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d turns in %s; the provider saw %d requests\n", r.turnCount(), r.elapsed.Round(time.Millisecond), r.requests)
	fmt.Fprintf(&b, "%-7s %5s %9s %7s %14s %13s %15s %14s %11s %15s\n", "tenant", "turns", "completed", "refused",
		"calls/allowed", "over (calls)", "tokens/budget", "over (tokens)", "share", "configured")
	for _, t := range r.tenants {
		fmt.Fprintf(&b, "%-7s %5d %9d %7d %14s %13d %15s %14d %10.1f%% %14.1f%%\n", t.tenant, t.turns, t.completed, t.refused,
			fmt.Sprintf("%d/%d", t.calls, t.allowed), t.overCalls, fmt.Sprintf("%d/%d", t.tokens, t.budget), t.overTokens,
			100*t.share, 100*t.configuredShare)
	}
	fmt.Fprintf(&b, "429 stretch: %d requests (%d in flight when it began; one per Retry-After allows %d); %d inside a Retry-After window; recovered %s after it\n",
		r.inStretch, r.inFlight, r.allowed, r.insideWindow, r.recovery.Round(time.Millisecond))
	return b.String()
}

func (r report) turnCount() int {
	n := 0
	for _, t := range r.tenants {
		n += t.turns
	}
	return n
}

// invariants are what must hold whatever the timing.
func (r report) invariants(t testing.TB) {
	for _, tr := range r.tenants {
		require.Zero(t, tr.overCalls, "%s: calls past its budget", tr.tenant)
		require.Zero(t, tr.overTokens, "%s: tokens past its budget", tr.tenant)
		require.Positive(t, tr.completed, tr.tenant)
		require.Equal(t, int64(tr.completed), tr.calls, "%s: one call a completed turn, none a refused one", tr.tenant)
	}
	require.Positive(t, r.inStretch, "the provider saw the stretch")
}

// heldRetryAfter: no request reached the provider inside a window a
// Retry-After asked it to wait. A request admitted before the 429 that
// paused the key may reach the provider up to DispatchMargin after it;
// one later than that under a loaded machine would look like a breach,
// so the benchmark asserts it and the test of the suite only reports it.
func (r report) heldRetryAfter(t testing.TB) {
	require.Zero(t, r.insideWindow, "requests inside a Retry-After window")
}

// TestSpendUnderLoad: 24 turns of three tenants at once against budgets
// of a known number of calls and a provider that answers 429 for a
// stretch: no tenant's ledger passes its budget in calls or tokens, and
// every turn completes or is refused by its budget. Requests inside a
// Retry-After window are reported (heldRetryAfter says why only).
func TestSpendUnderLoad(t *testing.T) {
	rep := run(t, options{
		tenants: []string{"a", "b", "c"},
		turns:   map[string]int{"a": 12, "b": 6, "c": 6},
		calls:   map[string]int{"a": 6, "b": 4, "c": 4},
		limits:  "openai=requests:8/1s",
		// After a few answers, 1.5 s of 429s that ask for 1 s.
		stretchAfter: 4, stretch: 1500 * time.Millisecond, retryAfter: time.Second,
	}, false)
	t.Log("\n" + rep.String())
	rep.invariants(t)
}

// BenchmarkSpend is `go tool task spend`: 64 turns of three tenants at
// once, tenant a with twice the turns and budget of b and c (budgets of
// 28, 14 and 14 calls by usage: a few turns of each are refused), against a
// provider of 10 requests a second (counted by the governor over 1.5 s)
// that answers 429 with a Retry-After of 1 s for 2 s once it has answered
// 12 calls. It prints the report and fails when an invariant breaks.
// TOPOLOGY=production runs it on the production topology: two worker
// processes on the real Temporal server.
func BenchmarkSpend(b *testing.B) {
	for b.Loop() {
		rep := run(b, options{
			tenants:      []string{"a", "b", "c"},
			turns:        map[string]int{"a": 32, "b": 16, "c": 16},
			calls:        map[string]int{"a": 28, "b": 14, "c": 14},
			limits:       "openai=requests:10/1s",
			stretchAfter: 12, stretch: 2 * time.Second, retryAfter: time.Second,
		}, os.Getenv("TOPOLOGY") == "production")
		b.Log("\n" + rep.String())
		rep.invariants(b)
		rep.heldRetryAfter(b)
	}
}
