package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/scripted"
)

// TestCallModelLedger: a call records the provider's usage and its cost
// at the tenant's price, once, however often the activity is retried.
func TestCallModelLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
		Prices: []agent.Price{{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}}}}}, false)
	require.NoError(t, err)
	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")

	var first, again contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	require.Equal(t, agent.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200, CachedTokens: 400, ReasoningTokens: 50}, first.Usage)
	h.execute(t, contract.CallModel, callModelInput(job, ag), &again)
	require.True(t, again.Stored)
	require.Equal(t, first.Usage, again.Usage)

	calls, err := h.store.JobUsage(t.Context(), "demo", job)
	require.NoError(t, err)
	require.Len(t, calls, 1, "the retry found the reply stored and recorded nothing")
	c := calls[0]
	require.Equal(t, []any{1, 1, "assistant", ag.Version, "openai:gpt-4o-mini"}, []any{c.Step, c.Attempt, c.AgentID, c.AgentVersion, c.Model})
	require.Equal(t, first.Usage, c.Usage)
	require.NotNil(t, c.Cost)
	// (1000-400) × 0.15 + 400 × 0.075 + 200 × 0.6, per million tokens.
	require.InDelta(t, (600*0.15+400*0.075+200*0.6)/1e6, *c.Cost, 1e-12)
}

// TestCallModelBudget: once the tenant's daily tokens are used, a call
// fails BudgetExceeded, for good, without calling the model.
func TestCallModelBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	budget := func(b agent.Budget) {
		_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
			Budgets: &agent.Budgets{Day: &b}}}}, false)
		require.NoError(t, err)
	}
	budget(agent.Budget{Tokens: 100000})

	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")
	var first contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	require.Equal(t, 1, h.model.Served("priced"), "under budget: the model is called")
	// The call used 1200 tokens: what is left of 1000 holds no call.
	budget(agent.Budget{Tokens: 1000})

	job = randomJob()
	ag = h.loadAgent(t, job, "priced again")
	_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeBudget, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), `tenant "demo" has used 1200 tokens this day (UTC); its day budget is 1000 tokens`)
	require.Equal(t, 1, h.model.Served("priced"), "over budget: the model is not called")
}

// TestCallModelCostBudget: the month's cost, at the tenant's prices, is
// bounded too.
func TestCallModelCostBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	budget := func(b agent.Budget) {
		_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
			Prices:  []agent.Price{{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}},
			Budgets: &agent.Budgets{Month: &b}}}}, false)
		require.NoError(t, err)
	}
	budget(agent.Budget{Cost: 1})

	job := randomJob()
	ag := h.loadAgent(t, job, "priced please")
	var first contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	budget(agent.Budget{Cost: 0.0002})

	job = randomJob()
	ag = h.loadAgent(t, job, "priced again")
	_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeBudget, app.Type())
	require.Contains(t, app.Error(), `tenant "demo" has spent 0.00024 USD this month (UTC); its month budget is 0.0002 USD`)
	require.Equal(t, 1, h.model.Served("priced"))
}

// reserveScript answers slowly, so that a test sees the call's
// reservation held while it runs.
const reserveScript = `
rules:
  - name: rejected
    when: {user: '^rejected'}
    fault: {status: 400, times: -1, message: 'unsupported parameter: temperature'}
  - name: slow
    when: {user: '^slow'}
    reply: {text: 'At last.', delay_ms: 1500, usage: {prompt_tokens: 70, completion_tokens: 30}}
  - name: answer
    reply: {text: 'Hello there.', usage: {prompt_tokens: 70, completion_tokens: 30}}
`

// TestCallModelReservesBudget: a call of a tenant with a budget holds
// its worst case while it runs (the prompt counted, plus the 4096 output
// tokens it is then bounded to, at the model's price), and gives it back
// when its reply is stored or its call fails; a tenant without a budget
// reserves nothing and its calls are sent as the agent says.
func TestCallModelReservesBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reserveScript)
	ctx := t.Context()
	reserved := func() agent.Spent {
		sp, err := h.store.Reserved(ctx, "demo")
		require.NoError(t, err)
		return sp
	}
	call := func(prompt string) (contract.CallModelResult, agent.Agent, error) {
		job := randomJob()
		ag := h.loadAgent(t, job, prompt)
		val, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		var res contract.CallModelResult
		if err == nil {
			require.NoError(t, val.Get(&res))
		}
		return res, ag, err
	}
	lastSent := func() scripted.Request {
		reqs := h.model.Requests()
		return reqs[len(reqs)-1]
	}

	_, _, err := call("hello")
	require.NoError(t, err)
	require.Zero(t, lastSent().MaxTokens, "no budget: the provider's default")
	require.Zero(t, reserved())

	price := agent.Price{Model: "openai:gpt-4o-mini", Input: 0.15, CachedInput: 0.075, Output: 0.6}
	_, err = h.applyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", ReplacePrices: true,
		Prices: []agent.Price{price}, Budgets: &agent.Budgets{Day: &agent.Budget{Tokens: 1_000_000}}}}}, false)
	require.NoError(t, err)

	job := randomJob()
	ag := h.loadAgent(t, job, "slow, please")
	done := make(chan error, 1)
	go func() {
		_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		done <- err
	}()
	var held agent.Spent
	require.Eventually(t, func() bool { held = reserved(); return held.Tokens > 0 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, <-done)
	stored, err := h.store.AgentVersion(ctx, "demo", ag.ID, ag.Version)
	require.NoError(t, err)
	prompt := agent.PromptTokens([]agent.Message{{Role: agent.RoleSystem, Content: "Be brief."}, {Role: agent.RoleUser, Content: "slow, please"}}, stored.Tools)
	require.Equal(t, agent.Reserve(prompt, agent.DefaultReservedOutputTokens, &price).Tokens, held.Tokens)
	require.InDelta(t, agent.Reserve(prompt, agent.DefaultReservedOutputTokens, &price).Cost, held.Cost, 1e-9)
	require.Equal(t, agent.DefaultReservedOutputTokens, lastSent().MaxTokens, "the call is bounded to what it reserved")
	require.Zero(t, reserved(), "settled when the reply was stored")

	_, _, err = call("rejected, this one")
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeModelRejected, app.Type())
	require.Zero(t, reserved(), "released when the call failed")
}

// TestCallModelCleanUp: whichever stage after reserve fails — the
// governor does not admit the call before its attempt ends, the model
// refuses it, or its reply cannot be stored — the call's budget
// reservation is given back and its governor slot freed. A reply that was
// paid for but not stored is counted in the ledger all the same, with
// what the provider counted; the step's next attempt, which stores its
// reply, is counted under its own attempt.
func TestCallModelCleanUp(t *testing.T) {
	t.Parallel()
	lim, err := governor.ParseLimits("openai=concurrent:1")
	require.NoError(t, err)
	var gov *governor.Governor
	h := newHarness(t, reserveScript, func(d *Deps) {
		gov, err = governor.New(governor.Options{Store: d.Store, Limits: lim, Logger: d.Logger})
		require.NoError(t, err)
		d.Governor = gov
	})
	ctx := t.Context()
	_, err = h.applyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
		Budgets: &agent.Budgets{Day: &agent.Budget{Tokens: 1_000_000}}}}}, false)
	require.NoError(t, err)
	reserved := func() agent.Spent {
		sp, err := h.store.Reserved(ctx, "demo")
		require.NoError(t, err)
		return sp
	}
	count := func(query string, args ...any) int {
		var n int
		require.NoError(t, h.store.Pool().QueryRow(ctx, query, args...).Scan(&n))
		return n
	}
	const inFlight = `SELECT count(*) FROM governor_grants WHERE held_until IS NOT NULL`

	t.Run("the governor does not admit it", func(t *testing.T) {
		blocker, err := gov.Acquire(ctx, governor.Call{Model: "openai:gpt-4o-mini", ID: "blocker", TenantID: "demo", Hold: time.Minute})
		require.NoError(t, err)
		job := randomJob()
		ag := h.loadAgent(t, job, "hello")
		// The attempt ends after a second, as its start-to-close timeout
		// would, while the slot is taken.
		env, _ := newActivityEnv(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
		env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&deadline{d: time.Second}}})
		h.acts.Register(env)
		sent := len(h.model.Requests())
		_, err = env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		require.Error(t, err)
		require.Len(t, h.model.Requests(), sent, "the model is not called")
		require.Zero(t, reserved(), "released when admission failed")
		blocker.Done(ctx, nil)
		require.Zero(t, count(inFlight))
	})

	t.Run("the model refuses it", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "rejected, this one")
		_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeModelRejected, app.Type())
		require.Zero(t, reserved(), "released when the call failed")
		require.Zero(t, count(inFlight), "the governor's slot is free")
		calls, err := h.store.JobUsage(ctx, "demo", job)
		require.NoError(t, err)
		require.Empty(t, calls, "no answer, nothing to count")
	})

	t.Run("its reply cannot be stored", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "hello")
		// The database refuses the reply's step, and only that.
		_, err := h.store.Pool().Exec(ctx, `
CREATE FUNCTION refuse_reply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.job_id = '`+job+`' AND NEW.seq = 1 THEN RAISE EXCEPTION 'no room for the reply'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_reply BEFORE INSERT ON turn_steps FOR EACH ROW EXECUTE FUNCTION refuse_reply()`)
		require.NoError(t, err)
		served := h.model.Served("answer")
		_, err = h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		require.ErrorContains(t, err, "no room for the reply")
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.False(t, app.NonRetryable(), "the retry calls the model again")
		require.Equal(t, served+1, h.model.Served("answer"))
		_, err = h.store.Step(ctx, "demo", job, 1)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "the reply is not stored: %v", err)
		require.Zero(t, reserved(), "released once the paid reply was counted")
		require.Zero(t, count(inFlight), "the governor's slot is free")
		require.Equal(t, 1, count(`SELECT count(*) FROM governor_grants WHERE call_id = $1 AND input_tokens = 70 AND output_tokens = 30`,
			fmt.Sprintf("demo/%s/1/1", job)), "the governor counts what the provider counted")
		calls, err := h.store.JobUsage(ctx, "demo", job)
		require.NoError(t, err)
		require.Len(t, calls, 1, "the paid reply is counted")
		require.Equal(t, []any{1, 1, 100}, []any{calls[0].Step, calls[0].Attempt, calls[0].Usage.TotalTokens})

		_, err = h.store.Pool().Exec(ctx, `DROP TRIGGER refuse_reply ON turn_steps; DROP FUNCTION refuse_reply()`)
		require.NoError(t, err)
		retry := callModelInput(job, ag)
		retry.AttemptBase = 1
		var res contract.CallModelResult
		h.execute(t, contract.CallModel, retry, &res)
		require.False(t, res.Stored, "the model was called again")
		require.Equal(t, "Hello there.", res.Content)
		require.Zero(t, reserved())
		calls, err = h.store.JobUsage(ctx, "demo", job)
		require.NoError(t, err)
		require.Len(t, calls, 2, "each paid call is counted once")
		require.Equal(t, []any{1, 2}, []any{calls[1].Step, calls[1].Attempt})
	})
}

// deadline is a worker interceptor that ends every activity's context
// after d, as an attempt's start-to-close timeout does.
type deadline struct {
	interceptor.WorkerInterceptorBase
	d time.Duration
}

func (w *deadline) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &deadlineInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, d: w.d}
}

type deadlineInbound struct {
	interceptor.ActivityInboundInterceptorBase
	d time.Duration
}

func (i *deadlineInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, i.d)
	defer cancel()
	return i.Next.ExecuteActivity(ctx, in)
}
