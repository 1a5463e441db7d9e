package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
)

// The model calls activities make outside CallModel's own stages — a
// prepare phase's questions, a memory extraction, and every embedding
// (through the metered.Embedder the worker wires into Deps.Embedder,
// Deps.Memories and the tools' knowledge) — pass metered.Gates: the
// tenant's budgets, the provider governor and the usage ledger, by one
// rule. An activity names the call's tenant and ledger key (withScope
// for the embeddings under ctx, meteredCall for its own asks); the key
// is the same for every attempt of the same work, so a retry that makes
// the same call again is counted once.

// gates are the activities' metered.Gates: the worker's governor, and the
// tenant's prices and budgets from its cached settings, as CallModel
// reads them.
func (a *Activities) gates() *metered.Gates {
	return &metered.Gates{Store: a.store, Governor: a.governor, Logger: a.logger, Billing: metered.CachedBilling(a.tenants)}
}

// withScope charges the embeddings made under ctx to s (metered.Scope),
// held no longer than the attempt may run. While the governor holds one,
// beat heartbeats the activity (nil: with what it waits for), so that
// an activity whose heartbeats carry its progress keeps it.
func withScope(ctx context.Context, s metered.Scope, beat func()) context.Context {
	s.Hold = attemptHold(ctx)
	s.Waiting = waiting(ctx, beat)
	return metered.WithScope(ctx, s)
}

// meteredCall passes req, a model call of the activity's own, through
// the gates as c (its Model, Input and Output filled from req) and
// returns the model's reply, or the gates' refusal or the model's
// failure as modelError says.
func (a *Activities) meteredCall(ctx context.Context, c metered.Call, req llm.Request) (*llm.Response, error) {
	c.Model, c.Input, c.Output = req.Model, agent.PromptTokens(req.Messages, req.Tools), req.MaxTokens
	c.Hold, c.Waiting = attemptHold(ctx), waiting(ctx, nil)
	var resp *llm.Response
	err := a.gates().Do(ctx, c, func(ctx context.Context) (u agent.Usage, err error) {
		resp, err = a.model.Generate(ctx, req)
		if err != nil {
			return u, modelError(err)
		}
		return resp.Usage, nil
	})
	return resp, err
}

// attemptHold bounds what an attempt's call holds if the attempt dies
// (reservationTTL); DefaultHold outside an activity.
func attemptHold(ctx context.Context) time.Duration {
	if !activity.IsActivity(ctx) {
		return metered.DefaultHold
	}
	return reservationTTL(activity.GetInfo(ctx).Deadline, time.Now())
}

// waiting heartbeats an activity while the governor holds its call.
func waiting(ctx context.Context, beat func()) func(governor.Wait) {
	if !activity.IsActivity(ctx) {
		return nil
	}
	return func(w governor.Wait) {
		if beat != nil {
			beat()
			return
		}
		activity.RecordHeartbeat(ctx, w.String())
	}
}
