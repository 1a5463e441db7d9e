package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// reservation is a call of the demo tenant's job at step and attempt
// that wants tokens, held for a minute.
func reservation(job string, step, attempt int, tokens int64) store.Reservation {
	return store.Reservation{TenantID: "demo", JobID: job, Step: step, Attempt: attempt,
		Want: agent.Spent{Tokens: tokens}, TTL: time.Minute}
}

func TestReserveBudget(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	now := time.Now()
	day := agent.Budgets{Day: &agent.Budget{Tokens: 1000}}.Periods()
	reserved := func() agent.Spent {
		sp, err := s.Reserved(ctx, "demo")
		require.NoError(t, err)
		return sp
	}

	require.NoError(t, s.Reserve(ctx, reservation("job-a", 1, 1, 600), day, now))
	// Nothing used, 600 held: a call of 600 more would pass the budget.
	err := s.Reserve(ctx, reservation("job-b", 1, 1, 600), day, now)
	requireCode(t, err, agent.CodeBudget)
	require.EqualError(t, err, `tenant "demo" has used 0 tokens this day (UTC) and calls in flight reserve 600 more; its day budget is 1000 tokens; this call would reserve 600 more`)
	// One of 400 fills it exactly.
	require.NoError(t, s.Reserve(ctx, reservation("job-b", 1, 1, 400), day, now))
	require.Equal(t, agent.Spent{Tokens: 1000}, reserved())
	err = s.Reserve(ctx, reservation("job-c", 1, 1, 10), day, now)
	requireCode(t, err, agent.CodeBudget)
	require.EqualError(t, err, `tenant "demo" has used 0 tokens this day (UTC) and calls in flight reserve 1000 more; its day budget is 1000 tokens; this call would reserve 10 more`)
	// The same attempt again (its write retried) keeps what it holds.
	require.NoError(t, s.Reserve(ctx, reservation("job-a", 1, 1, 600), day, now))
	require.Equal(t, agent.Spent{Tokens: 1000}, reserved())

	// job-a's reply is stored: its reservation becomes its real usage.
	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-a")))
	call := store.ModelCall{TenantID: "demo", JobID: "job-a", Step: 1, Attempt: 1, AgentID: "assistant", AgentVersion: 2,
		Model: "openai:m", Usage: agent.Usage{PromptTokens: 80, CompletionTokens: 20, TotalTokens: 100}}
	require.NoError(t, s.PutReply(ctx, call, agent.Message{Role: agent.RoleAssistant, Content: "hi"}))
	require.Equal(t, agent.Spent{Tokens: 400}, reserved())
	// Settled once: a second store of the step changes nothing.
	call.Attempt = 2
	require.NoError(t, s.PutReply(ctx, call, agent.Message{Role: agent.RoleAssistant, Content: "again"}))
	require.Equal(t, agent.Spent{Tokens: 400}, reserved())
	spent, err := s.SpentSince(ctx, "demo", agent.PeriodStart(agent.PeriodDay, now))
	require.NoError(t, err)
	require.Equal(t, int64(100), spent.Tokens)
	// 100 used, 400 held and 10 more fit in 1000: job-c may call now.
	require.NoError(t, s.Reserve(ctx, reservation("job-c", 1, 1, 10), day, now))

	// job-b's attempt 1 died: its attempt 2 releases it.
	require.NoError(t, s.Reserve(ctx, reservation("job-b", 1, 2, 500), day, now))
	require.Equal(t, agent.Spent{Tokens: 510}, reserved())
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM budget_reservations WHERE job_id = 'job-b'`))
	// A failed call gives back what it held; twice is no error.
	require.NoError(t, s.ReleaseReservation(ctx, "demo", "job-b", 1, 2))
	require.NoError(t, s.ReleaseReservation(ctx, "demo", "job-b", 1, 2))
	require.Equal(t, agent.Spent{Tokens: 10}, reserved())

	// A reservation whose attempt died with no later attempt expires.
	short := reservation("job-d", 1, 1, 890)
	short.TTL = 100 * time.Millisecond
	require.NoError(t, s.Reserve(ctx, short, day, now))
	requireCode(t, s.Reserve(ctx, reservation("job-e", 1, 1, 10), day, now), agent.CodeBudget)
	require.Eventually(t, func() bool { return reserved() == agent.Spent{Tokens: 10} }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, s.Reserve(ctx, reservation("job-e", 1, 1, 10), day, now))
	require.Zero(t, count(t, s, `SELECT count(*) FROM budget_reservations WHERE job_id = 'job-d'`), "expired reservations are deleted")

	// Other tenants and tenants without budgets are not held back.
	other := reservation("job-a", 1, 1, 1000)
	other.TenantID = "other"
	require.NoError(t, s.Reserve(ctx, other, day, now))
	require.NoError(t, s.Reserve(ctx, reservation("job-f", 1, 1, 5000), nil, now))
	require.Zero(t, count(t, s, `SELECT count(*) FROM budget_reservations WHERE job_id = 'job-f'`), "no budget, nothing held")
}

func TestReserveBudgetCost(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	now := time.Now()
	// A day of tokens to spare, a month of 1 USD.
	periods := agent.Budgets{Day: &agent.Budget{Tokens: 1e9}, Month: &agent.Budget{Cost: 1}}.Periods()
	want := func(job string, cost float64) store.Reservation {
		r := reservation(job, 0, 1, 10)
		r.Want.Cost = cost
		return r
	}
	require.NoError(t, s.Reserve(ctx, want("job-a", 0.5), periods, now))
	require.NoError(t, s.Reserve(ctx, want("job-b", 0.4), periods, now))
	requireCode(t, s.Reserve(ctx, want("job-c", 0.4), periods, now), agent.CodeBudget)
	require.NoError(t, s.Reserve(ctx, want("job-c", 0.1), periods, now), "0.5, 0.4 and 0.1 USD fit 1 USD exactly")
	err := s.Reserve(ctx, want("job-d", 0.01), periods, now)
	requireCode(t, err, agent.CodeBudget)
	require.EqualError(t, err, `tenant "demo" has spent 0 USD this month (UTC) and calls in flight reserve 1 USD more; its month budget is 1 USD; this call would reserve 0.01 USD more`)
}

func TestReserveBudgetRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	day := agent.Budgets{Day: &agent.Budget{Tokens: 1000}}.Periods()
	for name, r := range map[string]store.Reservation{
		"no tenant":         {JobID: "j", Step: 1, Attempt: 1, TTL: time.Minute},
		"no job":            {TenantID: "demo", Step: 1, Attempt: 1, TTL: time.Minute},
		"negative step":     {TenantID: "demo", JobID: "j", Step: -1, Attempt: 1, TTL: time.Minute},
		"attempt 0":         {TenantID: "demo", JobID: "j", Step: 1, TTL: time.Minute},
		"negative tokens":   {TenantID: "demo", JobID: "j", Step: 1, Attempt: 1, Want: agent.Spent{Tokens: -1}, TTL: time.Minute},
		"negative cost":     {TenantID: "demo", JobID: "j", Step: 1, Attempt: 1, Want: agent.Spent{Cost: -1}, TTL: time.Minute},
		"no time to live":   {TenantID: "demo", JobID: "j", Step: 1, Attempt: 1},
		"negative lifetime": {TenantID: "demo", JobID: "j", Step: 1, Attempt: 1, TTL: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			requireCode(t, s.Reserve(t.Context(), r, day, time.Now()), agent.CodeInvalid)
		})
	}
	require.Zero(t, count(t, s, `SELECT count(*) FROM budget_reservations`))
}

// TestReserveBudgetConcurrently: calls reserving at once are checked one
// after the other, so together they never pass the budget, and exactly
// as many pass as the budget lets through one by one.
func TestReserveBudgetConcurrently(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget agent.Budgets
		want   agent.Spent
		pass   int
	}{
		// 0, 100, ..., 900 held when reserving: ten pass, 1000 held.
		{"tokens, exact", agent.Budgets{Day: &agent.Budget{Tokens: 1000}}, agent.Spent{Tokens: 100}, 10},
		// 0, 300, 600 held: three pass, 900 held; a fourth would pass it.
		{"tokens, not a whole number of calls", agent.Budgets{Day: &agent.Budget{Tokens: 1000}}, agent.Spent{Tokens: 300}, 3},
		// 0, 0.3, 0.6 USD held: three pass.
		{"cost", agent.Budgets{Month: &agent.Budget{Cost: 1}}, agent.Spent{Tokens: 1, Cost: 0.3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, store.Options{})
			const calls = 40
			var wg sync.WaitGroup
			errs := make([]error, calls)
			start := make(chan struct{})
			for i := range calls {
				wg.Go(func() {
					<-start
					r := reservation(fmt.Sprintf("job-%d", i), 1, 1, tc.want.Tokens)
					r.Want = tc.want
					errs[i] = s.Reserve(t.Context(), r, tc.budget.Periods(), time.Now())
				})
			}
			close(start)
			wg.Wait()
			passed := 0
			for _, err := range errs {
				if err == nil {
					passed++
					continue
				}
				requireCode(t, err, agent.CodeBudget)
			}
			require.Equal(t, tc.pass, passed)
			held, err := s.Reserved(t.Context(), "demo")
			require.NoError(t, err)
			require.Equal(t, int64(tc.pass)*tc.want.Tokens, held.Tokens)
			b := tc.budget.Periods()[0]
			if b.Tokens > 0 {
				require.LessOrEqual(t, held.Tokens, b.Tokens, "no reservation over")
			} else {
				require.LessOrEqual(t, held.Cost, b.Cost+1e-9, "no reservation over")
			}
		})
	}
}
