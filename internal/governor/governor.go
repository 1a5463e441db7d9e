// Package governor holds every worker process's model calls to the
// limits of the providers they call: requests, input tokens and output
// tokens per sliding window and calls in flight, per governed key (a
// provider, or one of its models), declared by the operator
// (AGENTFLOW_MODEL_LIMITS, ParseLimits).
//
// It must not import the activities, the gateway or a model provider: they
// ask it before a call.
//
// The counts live in PostgreSQL (store.Admit), not in a process: each
// admission to a key locks the key's row, counts the key's grants on the
// database's clock and records its own, so ten worker processes on five
// machines are decided one after the other against one count, whatever
// their clocks say. A call over a limit waits in the key's queue, in
// priority order and, within a priority, fairly among tenants (the
// tenant with the fewest recent grants goes first), instead of being
// sent and refused; it asks again when the counts say a window will have
// room, heartbeating meanwhile, and gives up only with its context (its
// activity's timeout). A provider's 429 with a Retry-After or rate-limit
// reset headers pauses the key for the whole fleet (Governor.Refused).
//
// Why not Temporal's own distribution (a task queue per key with
// TaskQueueActivitiesPerSecond, fairness keys and priorities): the
// server's rate limit counts activity dispatches per second, not
// requests in a window nor tokens, lets a burst through, cannot be paused
// by a provider's 429, and its fairness needs a server with fairness
// turned on; the token and window counts would still need PostgreSQL.
//
// A tenant may narrow the operator's limits for its own calls (its
// catalog's model_limits, refused at apply when wider): its calls then
// pass two keys, the tenant's own (TenantKey) and then the operator's,
// so the narrower of each limit holds. A call waiting for the tenant's
// own limits holds no place in the operator's queue, and other tenants'
// calls go by it.
package governor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// DispatchMargin is added to every window when grants are counted: a
// call reaches the provider a little after it is admitted, and by a time
// that varies, so two calls admitted a window apart could arrive a
// little less than a window apart. Counting each grant that much longer
// keeps every window, as the provider counts it, within its limit.
const DispatchMargin = 500 * time.Millisecond

// Defaults of Options.
const (
	DefaultPriority = 3
	MinPriority     = 1 // the first served
	MaxPriority     = 5
	DefaultPoll     = 200 * time.Millisecond
)

// maxPolls bounds the polls a waiting call deep in the queue skips.
const maxPolls = 10

// aliveGrace is how long a waiting call stays queued past the time it
// said it would ask again.
const aliveGrace = 5 * time.Second

// tick is the longest a waiting call goes without telling its caller it
// still waits (Call.Waiting), which heartbeats the activity.
const tick = time.Second

// Options configure a Governor.
type Options struct {
	Store  *store.Store // required
	Limits Limits       // the governed keys; none governs nothing
	Logger *zap.Logger  // required
	// Metrics registers the governor's metrics; nil registers none.
	Metrics prometheus.Registerer
	// Poll is how soon a waiting call asks again when the counts cannot
	// say when it may pass (a concurrent slot, a call ahead of it).
	// Default DefaultPoll.
	Poll time.Duration
	// TenantLimits reads a tenant's own limits on its model calls, by
	// governed key (store.Billing.ModelLimits); nil: tenants have none.
	TenantLimits func(ctx context.Context, tenantID string) (map[string]agent.ModelLimits, error)
}

// Governor admits model calls under the operator's limits.
type Governor struct {
	store   *store.Store
	limits  Limits
	tenant  func(ctx context.Context, tenantID string) (map[string]agent.ModelLimits, error)
	log     *zap.Logger
	metrics *Metrics
	poll    time.Duration
}

// New returns a governor; with no limits declared it admits every call at
// once, touching nothing.
func New(o Options) (*Governor, error) {
	if o.Store == nil || o.Logger == nil {
		return nil, fmt.Errorf("governor: Store and Logger are required")
	}
	g := &Governor{store: o.Store, limits: o.Limits, tenant: o.TenantLimits, log: o.Logger, poll: o.Poll}
	g.poll = agent.OrDefault(g.poll, DefaultPoll)
	if o.Metrics != nil {
		g.metrics = NewMetrics(o.Metrics)
	}
	return g, nil
}

// Call is a model call asking to be sent.
type Call struct {
	Model    string // "provider:model"
	ID       string // the call's attempt: unique among the fleet's calls
	TenantID string
	// Priority orders waiting calls: 1 (MinPriority) first, 5 last; 0
	// means DefaultPriority.
	Priority int
	// Input and Output are the call's worst case in tokens: its counted
	// prompt and its max_tokens (0 when it sets none).
	Input, Output int64
	// Hold bounds how long the call holds a concurrent slot if it is
	// never released: its attempt's time left.
	Hold time.Duration
	// Waiting, when set, is called while the call waits, at least every
	// second: the activity heartbeats with it.
	Waiting func(Wait)
	// NoWait asks for an admission now or not at all: a call its keys do
	// not admit at once gets a *WouldWait error, leaves the queue and holds
	// nothing. A local model call asks so: it would wait inside its
	// turn's workflow task, where the wait shows nowhere and holds a task
	// slot, and the turn sends it as an activity instead.
	NoWait bool
}

// WouldWait is Acquire's error for a NoWait call its keys did not admit.
type WouldWait struct{ Wait Wait }

func (e *WouldWait) Error() string { return e.Wait.String() }

// Wait says what a waiting call waits for.
type Wait struct {
	Key    string
	Reason string // a store.Governor* reason
	Ahead  int    // calls ahead of it in the key's queue
	Waited time.Duration
}

func (w Wait) String() string {
	what := map[string]string{
		store.GovernorPaused:       "the provider asked to wait",
		store.GovernorConcurrent:   "its calls in flight are at the limit",
		store.GovernorRequests:     "its requests are at the limit",
		store.GovernorInputTokens:  "its input tokens are at the limit",
		store.GovernorOutputTokens: "its output tokens are at the limit",
		store.GovernorQueue:        "calls ahead are sent first",
	}[w.Reason]
	return fmt.Sprintf("waiting for %s: %s (%d calls ahead, waited %s)", w.Key, what, w.Ahead, w.Waited.Round(time.Millisecond))
}

// Permit is an admitted call: release it with Done when the call ends.
// A nil Permit (an ungoverned call) is valid and does nothing.
type Permit struct {
	g        *Governor
	key, id  string
	tenantID string
	// own is the permit of the tenant's own key, released with this one.
	own *Permit
}

// Granted is the permit of a call admitted under key by another
// process or activity (its Call.ID), for whoever sees the call end to
// release it: a call one activity admits and another outlives.
func (g *Governor) Granted(key, id, tenantID string) *Permit {
	return &Permit{g: g, key: key, id: id, tenantID: tenantID}
}

// Acquire waits until the call's keys admit it — the tenant's own, then
// the operator's — and returns its permit; an ungoverned model returns a
// nil permit at once. It returns an error when ctx ends first (the call
// is then withdrawn from the queue) or the database fails.
func (g *Governor) Acquire(ctx context.Context, c Call) (*Permit, error) {
	own, err := g.acquireOwn(ctx, c)
	if err != nil {
		return nil, err
	}
	key, lim, ok := g.limits.For(c.Model)
	if !ok {
		return own, nil
	}
	p, err := g.AcquireKey(ctx, key, lim, c)
	var ww *WouldWait
	switch {
	case errors.As(err, &ww):
		own.revoke(ctx) // never sent: it takes nothing of the tenant's limits
		return nil, err
	case err != nil:
		own.Done(ctx, nil)
		return nil, err
	}
	p.own = own
	return p, nil
}

// acquireOwn waits for the tenant's own limits of the call's model, if
// it declared any.
func (g *Governor) acquireOwn(ctx context.Context, c Call) (*Permit, error) {
	if g.tenant == nil {
		return nil, nil
	}
	limits, err := g.tenant(ctx, c.TenantID)
	if err != nil {
		return nil, fmt.Errorf("load model limits of tenant %q: %w", c.TenantID, err)
	}
	key, lim, ok := agent.ModelLimitsFor(limits, c.Model)
	if !ok {
		return nil, nil
	}
	return g.AcquireKey(ctx, TenantKey(c.TenantID, key), lim, c)
}

// TenantKey is the governed key of a tenant's own limits of key (a
// provider or provider:model).
func TenantKey(tenantID, key string) string { return "tenant:" + tenantID + ":" + key }

// AcquireKey is Acquire for a key and limits the caller names — a
// tenant's tool entry (ToolKey) — instead of the operator's model limits.
func (g *Governor) AcquireKey(ctx context.Context, key string, lim store.GovernorLimits, c Call) (*Permit, error) {
	prio := cmp.Or(c.Priority, DefaultPriority)
	if prio < MinPriority || prio > MaxPriority {
		return nil, agent.Errorf(agent.CodeInvalid, "priority %d: want %d (first) to %d (last)", prio, MinPriority, MaxPriority)
	}
	sc := store.GovernorCall{Key: key, CallID: c.ID, TenantID: c.TenantID, Priority: prio,
		Input: c.Input, Output: c.Output, Hold: c.Hold, Alive: g.poll + aliveGrace}
	lim = withMargin(lim)
	start := time.Now()
	waiting := false
	defer func() {
		if waiting {
			g.metrics.waiting(key, -1)
		}
	}()
	for {
		adm, err := g.store.Admit(ctx, lim, sc)
		if err != nil {
			return nil, err
		}
		if adm.Granted {
			g.metrics.admitted(key, time.Since(start))
			return &Permit{g: g, key: key, id: c.ID, tenantID: c.TenantID}, nil
		}
		if c.NoWait {
			g.withdraw(ctx, key, c.ID)
			return nil, &WouldWait{Wait: Wait{Key: key, Reason: adm.Reason, Ahead: adm.Ahead}}
		}
		if !waiting {
			waiting = true
			g.metrics.waiting(key, 1)
			g.log.Info("call waits for its key's limits", zap.String("key", key), zap.String("tenant", c.TenantID),
				zap.String("call", c.ID), zap.String("reason", adm.Reason), zap.Int("ahead", adm.Ahead))
		}
		wait := adm.Retry
		if wait <= 0 {
			// Only asking again tells. A call behind others while there is
			// room asks again soon: the first is being admitted. A call
			// waiting for a slot asks less often the deeper it is in the
			// queue.
			wait = g.poll
			if adm.Reason == store.GovernorConcurrent {
				wait *= time.Duration(min(1+adm.Ahead, maxPolls))
			}
		}
		// Calls told the same time do not all ask at the same instant.
		wait += rand.N(g.poll/4 + 1)
		sc.Alive = wait + aliveGrace
		w := Wait{Key: key, Reason: adm.Reason, Ahead: adm.Ahead}
		if err := g.sleep(ctx, wait, start, w, c.Waiting); err != nil {
			g.withdraw(ctx, key, c.ID)
			return nil, fmt.Errorf("%s: %w", w.String(), err)
		}
	}
}

// sleep waits d, telling waiting what the call waits for every tick.
func (g *Governor) sleep(ctx context.Context, d time.Duration, start time.Time, w Wait, waiting func(Wait)) error {
	end := time.Now().Add(d)
	for {
		if waiting != nil {
			w.Waited = time.Since(start)
			waiting(w)
		}
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, tick))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// withdraw takes a call that gave up off its key's queue; left there, it
// would lapse anyway.
func (g *Governor) withdraw(ctx context.Context, key, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.store.Withdraw(ctx, key, id); err != nil {
		g.log.Warn("waiting call not withdrawn; it lapses", zap.String("key", key), zap.String("call", id), zap.Error(err))
	}
}

// revoke takes back a permit whose call was never sent, as if it had not
// been granted; a nil permit does nothing.
func (p *Permit) revoke(ctx context.Context) {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.g.store.Revoke(ctx, p.key, p.id); err != nil {
		p.g.log.Warn("unsent call's grant not revoked; it counts until its window passes", zap.String("key", p.key),
			zap.String("call", p.id), zap.Error(err))
	}
}

// withMargin counts every window DispatchMargin longer.
func withMargin(l store.GovernorLimits) store.GovernorLimits {
	for _, w := range []*time.Duration{&l.RequestWindow, &l.InputWindow, &l.OutputWindow} {
		if *w > 0 {
			*w += DispatchMargin
		}
	}
	return l
}

// Done releases the call's concurrent slot and counts the tokens the
// provider reported (usage), or keeps its worst case when usage is nil
// (the call failed).
func (p *Permit) Done(ctx context.Context, usage *agent.Usage) {
	if p == nil {
		return
	}
	p.own.Done(ctx, usage)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var in, out *int64
	if usage != nil {
		i, o := int64(usage.PromptTokens), int64(usage.CompletionTokens)
		in, out = &i, &o
		p.g.metrics.tokens(p.key, i, o)
	}
	if err := p.g.store.Settle(ctx, p.key, p.id, in, out); err != nil {
		p.g.log.Warn("governed call not settled; its slot is held until its attempt's deadline", zap.String("key", p.key),
			zap.String("call", p.id), zap.Error(err))
	}
}

// Refused tells the governor a provider refused a call of model and
// asked to wait d (its Retry-After or rate-limit reset headers): the
// model's key admits no call, in any process, until then.
func (g *Governor) Refused(ctx context.Context, model string, d time.Duration) {
	key, _, ok := g.limits.For(model)
	if !ok || d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.store.PauseKey(ctx, key, d); err != nil {
		g.log.Warn("governed key not paused", zap.String("key", key), zap.Duration("for", d), zap.Error(err))
		return
	}
	g.metrics.paused(key)
	g.log.Info("provider asked to wait; governed key paused", zap.String("key", key), zap.Duration("for", d))
}

// ToolKey is the governed key of a tenant's tool entry.
func ToolKey(tenantID, entry string) string { return "tool:" + tenantID + ":" + entry }

// ToolLimits are a tool entry's rate limit as the governor's limits.
func ToolLimits(r agent.ToolRateLimit) store.GovernorLimits {
	l := store.GovernorLimits{Concurrent: r.Concurrent}
	if r.PerMinute > 0 {
		l.Requests, l.RequestWindow = r.PerMinute, time.Minute
	}
	return l
}
