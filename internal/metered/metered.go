// Package metered makes the model calls that are no turn's step — the
// knowledge features' embeddings (ingest, search, retrieve, remember,
// recall), a prepare phase's questions, a memory extraction — through the
// three gates a turn's own call (activities.CallModel) passes, by one
// rule:
//
//  1. the tenant's budgets: the call's worst case (its counted input and
//     the most output it may write, at the model's price) is reserved
//     before it is sent (store.Store.Reserve), or the call is refused with
//     agent.CodeBudget and nothing is sent;
//  2. the provider governor: the call waits for the model's limits
//     (governor.Governor.Acquire), and a provider's Retry-After pauses the
//     model's key for the fleet (governor.Governor.Refused);
//  3. the usage ledger: the call the model answered is counted
//     (store.Store.PutUsage) with its kind (store.Kind*), then its
//     reservation is released.
//
// A call is keyed by the caller: its tenant, a key that is the same for
// every retry of the same work (a page of an ingest and where it starts,
// a turn's job and step, an extraction's origin) and a sequence number
// under it. The ledger counts one row per key and sequence number, so an
// activity's retry that makes the same call again adds no second row, and
// its reservation replaces the first attempt's.
//
// Embedder puts the gates in front of a knowledge.Embedder, for the
// callers that reach the model only through one (knowledge.Store,
// knowledge.Searcher, knowledge.Memories): the tenant and key come from
// the context (WithScope), and a call with none is refused rather than
// sent unbudgeted.
//
// It must not import the activities or the gateway, which both call it.
package metered

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
)

// DefaultHold is how long a call's reservation and governor slot outlive
// a call that dies without giving them back, when the caller sets no
// Call.Hold: the default turn timeout.
const DefaultHold = time.Duration(agent.DefaultTurnTimeoutSec) * time.Second

// settleTimeout bounds the writes that end a call: they run even when
// the call's context has ended.
const settleTimeout = 5 * time.Second

// Gates are the three gates of a model call. Store is required; a nil
// Governor governs nothing.
type Gates struct {
	Store    *store.Store
	Governor *governor.Governor
	// Billing reads a tenant's prices and budgets; nil reads them from
	// Store (store.Store.TenantBilling) on every call.
	Billing func(ctx context.Context, tenantID string) (store.Billing, error)
	Logger  *zap.Logger // nil: zap.NewNop()
}

// Call is one model call asking to pass the gates.
type Call struct {
	TenantID string
	// Key is the ledger's job id of the call: the same for every retry of
	// the same work, unique to it within the tenant.
	Key string
	// Seq numbers the calls under Key (0, 1, …): the ledger's step.
	Seq          int
	Kind         string // store.KindEmbedding, KindPrepare, KindMemory, …
	Model        string // "provider:model"
	AgentID      string
	AgentVersion int
	SessionID    string
	Channel      string // the door of the call's turn; "" for none
	// Priority orders the call among those waiting for the governor
	// (governor.Call.Priority); 0 is the default.
	Priority int
	// Input and Output are the call's worst case in tokens: its counted
	// input (agent.EstimateTokens) and its max_tokens (0 for embeddings).
	Input, Output int
	// Hold bounds how long the call's reservation and governor slot are
	// held if it never gives them back: in an activity, the attempt's time
	// left. Default DefaultHold.
	Hold time.Duration
	// Waiting, when set, is told what the call waits for at least every
	// second while the governor holds it: an activity heartbeats with it.
	Waiting func(governor.Wait)
}

// Do passes c through the gates and makes it with send, which returns
// what the provider counted. It returns send's error, or the gates'
// (agent.CodeBudget when the tenant's budgets refuse the call, which is
// then not sent).
func (g *Gates) Do(ctx context.Context, c Call, send func(context.Context) (agent.Usage, error)) error {
	if g == nil || g.Store == nil {
		return agent.Errorf(agent.CodeInternal, "model call %s: no usage ledger to count it in", c.Kind)
	}
	c.Kind = cmp.Or(c.Kind, store.KindChat)
	c.Hold = agent.OrDefault(c.Hold, DefaultHold)
	billing, err := g.billing(ctx, c.TenantID)
	if err != nil {
		return fmt.Errorf("load prices and budgets: %w", err)
	}
	held, err := g.reserve(ctx, c, billing)
	if err != nil {
		return err
	}
	permit, err := g.admit(ctx, c)
	if err != nil {
		g.release(ctx, c, held)
		return err
	}
	usage, err := send(ctx)
	if err != nil {
		permit.Done(ctx, nil)
		g.refused(ctx, c.Model, err)
		g.release(ctx, c, held)
		return err
	}
	permit.Done(ctx, &usage)
	g.count(ctx, c, billing, held, usage)
	return nil
}

// reserve holds the call's worst case against the tenant's budgets; it
// says whether a reservation may be held.
func (g *Gates) reserve(ctx context.Context, c Call, billing store.Billing) (bool, error) {
	periods := billing.Budgets.Periods()
	if len(periods) == 0 {
		return false, nil
	}
	var price *agent.Price
	if p, ok := agent.PriceOf(billing.Prices, c.Model); ok {
		price = &p
	}
	r := store.Reservation{TenantID: c.TenantID, JobID: c.Key, Step: c.Seq, Attempt: 1,
		Want: agent.Reserve(c.Input, c.Output, price), TTL: c.Hold}
	err := g.Store.Reserve(ctx, r, periods, time.Now())
	if agent.IsCode(err, agent.CodeBudget) {
		g.log().Info("model call refused: budget reached", zap.String("tenant", c.TenantID), zap.String("key", c.Key),
			zap.String("kind", c.Kind), zap.Int64("tokens_wanted", r.Want.Tokens), zap.Float64("cost_wanted", r.Want.Cost))
		return false, err
	}
	// Whatever else went wrong, the reservation may have been made before
	// it did: releasing it is harmless if it was not.
	return true, err
}

// admit waits for the governor's permit; nil for an ungoverned call.
func (g *Gates) admit(ctx context.Context, c Call) (*governor.Permit, error) {
	if g.Governor == nil {
		return nil, nil
	}
	return g.Governor.Acquire(ctx, governor.Call{
		Model: c.Model, ID: fmt.Sprintf("%s/%s/%d/%s", c.TenantID, c.Key, c.Seq, rand.Text()), TenantID: c.TenantID,
		Priority: c.Priority, Input: int64(c.Input), Output: int64(c.Output), Hold: c.Hold, Waiting: c.Waiting,
	})
}

// refused passes a provider's request to wait to the governor.
func (g *Gates) refused(ctx context.Context, model string, err error) {
	if g.Governor == nil {
		return
	}
	if d := RetryAfter(err); d > 0 {
		g.Governor.Refused(ctx, model, d)
	}
}

// RetryAfter is how long a failed call's provider asked to wait (its
// Retry-After or rate-limit reset headers), as the model layer
// (*llm.Error) or a classified failure (*agent.Error) says; 0 for none.
func RetryAfter(err error) time.Duration {
	if le, ok := errors.AsType[*llm.Error](err); ok {
		return le.RetryAfter
	}
	if ae, ok := errors.AsType[*agent.Error](err); ok {
		return ae.RetryAfter
	}
	return 0
}

// count writes the call's ledger row, then releases its reservation:
// counted twice for a moment rather than not at all. When the row cannot
// be written, the reservation stands for the call until it expires.
func (g *Gates) count(ctx context.Context, c Call, billing store.Billing, held bool, usage agent.Usage) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	row := store.ModelCall{TenantID: c.TenantID, JobID: c.Key, Step: c.Seq, Attempt: 1, AgentID: c.AgentID,
		AgentVersion: c.AgentVersion, SessionID: c.SessionID, Model: c.Model, Channel: c.Channel, Kind: c.Kind, Usage: usage}
	if p, ok := agent.PriceOf(billing.Prices, c.Model); ok {
		cost := p.Cost(usage)
		row.Cost = &cost
	}
	if err := g.Store.PutUsage(ctx, row); err != nil {
		g.log().Warn("model call not counted; its budget reservation stands for it until it expires", zap.String("tenant", c.TenantID),
			zap.String("key", c.Key), zap.Int("seq", c.Seq), zap.String("kind", c.Kind), zap.Error(err))
		return
	}
	g.release(ctx, c, held)
}

// release gives back the call's reservation, if it may hold one.
func (g *Gates) release(ctx context.Context, c Call, held bool) {
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := g.Store.ReleaseReservation(ctx, c.TenantID, c.Key, c.Seq, 1); err != nil {
		g.log().Warn("budget reservation not released; it expires", zap.String("tenant", c.TenantID),
			zap.String("key", c.Key), zap.Int("seq", c.Seq), zap.Error(err))
	}
}

// CachedBilling reads a tenant's prices and budgets from its cached
// runtime settings (tenant.Cache), as a turn's own calls read them: a
// Gates.Billing. A tenant with no catalog has neither.
func CachedBilling(tenants *tenant.Cache) func(context.Context, string) (store.Billing, error) {
	return func(ctx context.Context, tenantID string) (store.Billing, error) {
		settings, err := tenants.Settings(ctx, tenantID)
		switch {
		case agent.IsCode(err, agent.CodeNotFound):
			return store.Billing{}, nil
		case err != nil:
			return store.Billing{}, err
		}
		return settings.Billing, nil
	}
}

func (g *Gates) billing(ctx context.Context, tenantID string) (store.Billing, error) {
	if g.Billing != nil {
		return g.Billing(ctx, tenantID)
	}
	return g.Store.TenantBilling(ctx, tenantID)
}

func (g *Gates) log() *zap.Logger {
	if g.Logger == nil {
		return zap.NewNop()
	}
	return g.Logger
}
