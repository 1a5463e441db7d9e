package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/store"
)

// reservationGrace is added to an attempt's deadline when its
// reservation is made to expire: the deadline is read on the worker's
// clock, the expiry is kept on the database's.
const reservationGrace = 30 * time.Second

// budgets is the tenant's budgets as a hook of every model call, after
// the worker's own (concerns): the call's worst case is reserved before
// it is sent (reserve), or the call refused with BudgetExceeded; storing
// the reply settles the reservation to the call's real usage
// (store.PutReply), and the clean-up releases it when the call fails
// (giveBackReservation).
func (a *Activities) budgets() hooks.Handler {
	return hooks.Handler{
		Name: "budgets",
		ModelStart: modelStart(func(ctx context.Context, m *modelCall, c *hooks.ModelCall) error {
			err := m.reserve(ctx, c.Messages)
			if m.held {
				m.giveBack = append(m.giveBack, m.giveBackReservation)
			}
			return err
		}),
	}
}

// reserve holds the model call's worst case against the tenant's
// budgets before it is sent (store.Reserve), or refuses it with
// BudgetExceeded. The worst case is the prompt counted from the messages
// and the agent's tools (agent.PromptTokens) plus the agent's
// max_output_tokens, costed at the model's price. An agent of a tenant
// with a budget that sets no max_output_tokens gets
// agent.DefaultReservedOutputTokens, which the call is then sent with:
// the reservation bounds what the call may use only if the provider is
// held to it. msgs are what the model reads.
func (m *modelCall) reserve(ctx context.Context, msgs []agent.Message) error {
	a, in := m.a, m.in
	periods := m.billing.Budgets.Periods()
	if len(periods) == 0 {
		return nil
	}
	m.ag.Limits.MaxOutputTokens = agent.OrDefault(m.ag.Limits.MaxOutputTokens, agent.DefaultReservedOutputTokens)
	var price *agent.Price
	if p, ok := agent.PriceOf(m.billing.Prices, m.ag.Model); ok {
		price = &p
	}
	info := activity.GetInfo(ctx)
	r := store.Reservation{TenantID: in.TenantID, JobID: in.JobID, Step: in.Seq, Attempt: stepAttempt(ctx, in),
		Want: agent.Reserve(agent.PromptTokens(msgs, m.ag.Tools), m.ag.Limits.MaxOutputTokens, price),
		TTL:  reservationTTL(info.Deadline, time.Now())}
	err := a.db(ctx, "reserve budget", func() error { return a.store.Reserve(ctx, r, periods, time.Now()) })
	if agent.IsCode(err, agent.CodeBudget) {
		a.log(ctx).Info("model call refused: budget reached", zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
			zap.Int64("tokens_wanted", r.Want.Tokens), zap.Float64("cost_wanted", r.Want.Cost))
		return err
	}
	// Whatever else went wrong, the reservation may have been made before
	// it did: the clean-up releases it, which is harmless if it was not.
	m.held = true
	return err
}

// reservationTTL is how long a reservation made at now outlives an
// attempt that dies with no later attempt to release it: until the
// attempt's deadline (its start-to-close timeout, the turn's timeout),
// past which Temporal has given the attempt up and its context, and so
// its model call, is cancelled; the turn's default timeout when the
// attempt has none.
func reservationTTL(deadline, now time.Time) time.Duration {
	left := time.Duration(agent.DefaultTurnTimeoutSec) * time.Second
	if !deadline.IsZero() {
		left = max(deadline.Sub(now), 0)
	}
	return left + reservationGrace
}

// giveBackReservation releases the reservation of a call whose reply
// was not stored, unless the reservation stands for a paid reply the
// ledger could not count (modelCall.uncounted), until it expires with the
// attempt or the step's next attempt reserves.
func (m *modelCall) giveBackReservation(ctx context.Context) {
	if m.stored || m.uncounted || !m.held {
		return
	}
	// The stage may have failed because ctx was cancelled.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	m.release(ctx)
}

// release gives back the reservation of a call with no reply to store,
// so that the turn's retry, or another turn, may use it. Left held, it
// would still go when the step's next attempt reserves or when it
// expires.
func (m *modelCall) release(ctx context.Context) {
	in := m.in
	if err := m.a.store.ReleaseReservation(ctx, in.TenantID, in.JobID, in.Seq, stepAttempt(ctx, in)); err != nil {
		m.a.log(ctx).Warn("budget reservation not released; it expires with the attempt", zap.String("tenant", in.TenantID),
			zap.String("job_id", in.JobID), zap.Int("step", in.Seq), zap.Error(err))
	}
	m.held = false
}
