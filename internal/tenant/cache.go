package tenant

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/routing"
	"github.com/agentflow/agentflow/internal/store"
)

// maxAge bounds how long a tenant's settings are trusted without a
// notification, in case one was lost.
const maxAge = 30 * time.Second

// Cache holds each tenant's runtime settings, built once per catalog
// version. A catalog change (store.CatalogChannel) drops the tenant's
// settings, so the next turn routes and calls out with the new catalog;
// turns in flight keep what they routed and loaded.
type Cache struct {
	store   *store.Store
	pool    *pgxpool.Pool
	egress  *egress.Operator
	logger  *zap.Logger
	now     func() time.Time
	Metrics *Metrics // nil: none
	// PIIKey keys the hashes of the tenants' PII redaction (ModeHash):
	// the operator's vault key. Set before the first load.
	PIIKey []byte

	mu      sync.Mutex
	tenants map[string]*Settings
	// gen counts invalidations, so that settings read before a change
	// is not stored after it.
	gen      uint64
	watchers map[string]map[chan struct{}]struct{}
	// loads shares a tenant's load among the callers waiting for it.
	loads singleflight.Group
}

// Settings are a tenant's runtime settings at one catalog version: what
// every turn of the tenant needs besides its agent — the routing table, the
// egress-limited HTTP client, billing, PII redaction.
type Settings struct {
	TenantID     string
	Version      int64
	DefaultAgent string
	Table        *routing.Table
	// HTTP calls out under the tenant's egress allowlist, within the
	// operator's policy; tools get it.
	HTTP *http.Client
	// Billing is the tenant's prices and budgets, which every model call
	// needs (its cost, its reservation).
	Billing store.Billing
	// PII redacts what enters the tenant's turns (nil: nothing), with
	// PIIConfig its settings.
	PII       *guard.Redactor
	PIIConfig guard.Config
	loaded    time.Time
}

// NewCache returns a Cache over st whose settings call out within what
// the operator's policy op allows (nil: the default policy); Run keeps it
// current.
func NewCache(st *store.Store, op *egress.Operator, logger *zap.Logger) *Cache {
	return &Cache{store: st, pool: st.Pool(), egress: op, logger: logger, now: time.Now, tenants: map[string]*Settings{},
		watchers: map[string]map[chan struct{}]struct{}{}}
}

// loadTimeout bounds a load that callers share: it outlives the caller
// that began it, whose leaving must not fail the others.
const loadTimeout = 30 * time.Second

// Settings returns the tenant's current settings, loading and compiling
// them when they are missing or stale. Callers that miss at once share one load:
// a catalog change, or a cold process under load, reads the tenant's
// catalog once, not once per turn waiting for it.
func (c *Cache) Settings(ctx context.Context, tenantID string) (*Settings, error) {
	c.mu.Lock()
	s, gen := c.tenants[tenantID], c.gen
	c.mu.Unlock()
	if s != nil && c.now().Sub(s.loaded) < maxAge {
		return s, nil
	}
	// Keyed by generation too: a caller after a change never takes the
	// settings of a load that began before it.
	ch := c.loads.DoChan(tenantID+"@"+strconv.FormatUint(gen, 10), func() (any, error) {
		// A caller that saw the miss just before another's load finished
		// and left the group finds that load's settings here, not a
		// second read of the same catalog.
		c.mu.Lock()
		fresh, g := c.tenants[tenantID], c.gen
		c.mu.Unlock()
		if g == gen && fresh != nil && fresh != s && c.now().Sub(fresh.loaded) < maxAge {
			return fresh, nil
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		return c.load(lctx, tenantID, s, gen)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Settings), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load reads and compiles the tenant's settings as of generation gen,
// keeping the compiled ones, s, when the catalog version has not changed.
func (c *Cache) load(ctx context.Context, tenantID string, s *Settings, gen uint64) (*Settings, error) {
	start := c.now()
	r, err := c.store.TenantSettings(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if s != nil && s.Version == r.Version {
		s2 := *s
		s2.loaded, s2.Billing = c.now(), r.Billing
		c.put(&s2, gen)
		return &s2, nil
	}
	table, err := routing.Compile(r.Rules, nil)
	if err != nil {
		// Stored rules were checked when applied; a failure here is a bug
		// or a hand-edited database, and it must be loud.
		return nil, agent.Errorf(agent.CodeInternal, "tenant %q: compile routing rules of catalog version %d: %v", tenantID, r.Version, err)
	}
	policy, err := egress.ParsePolicy(r.Egress)
	if err != nil {
		// Checked when the catalog was applied; a policy that no longer
		// parses allows nothing rather than everything.
		c.logger.Error("tenant egress allowlist unreadable; tools may call nothing", zap.String("tenant", tenantID), zap.Error(err))
		policy = egress.Policy{}
	}
	policy.Tenant = tenantID
	for _, e := range r.Egress {
		// Stored before the operator's policy forbade it; the client
		// refuses it at every call, and the operator should know why.
		if err := c.egress.CheckEntry(e); err != nil {
			c.logger.Warn("tenant egress entry outside the operator's policy; calls to it are refused", zap.String("tenant", tenantID), zap.Error(err))
		}
	}
	s = &Settings{TenantID: tenantID, Version: r.Version, DefaultAgent: r.DefaultAgent, Table: table,
		HTTP: c.egress.Client(policy), Billing: r.Billing, loaded: c.now()}
	if len(r.PII) > 0 {
		// Checked when the catalog was applied; one that no longer
		// compiles must be loud, and redacts with the defaults meanwhile.
		if err := json.Unmarshal(r.PII, &s.PIIConfig); err == nil {
			s.PII, err = guard.New(s.PIIConfig, c.PIIKey)
			if err != nil {
				c.logger.Error("tenant pii settings unreadable; redacting every kind by mask", zap.String("tenant", tenantID), zap.Error(err))
			}
		}
		if s.PII == nil {
			s.PIIConfig = guard.Config{}
			s.PII, _ = guard.New(s.PIIConfig, c.PIIKey)
		}
	}
	c.put(s, gen)
	if m := c.Metrics; m != nil {
		m.reload.Observe(c.now().Sub(start).Seconds())
		m.nodes.WithLabelValues(tenantID, "agent").Set(float64(r.Agents))
		m.nodes.WithLabelValues(tenantID, "tool").Set(float64(r.Tools))
		m.nodes.WithLabelValues(tenantID, "rule").Set(float64(len(r.Rules)))
	}
	return s, nil
}

// put keeps s unless the cache was invalidated since gen was read.
func (c *Cache) put(s *Settings, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if old := c.tenants[s.TenantID]; old == nil || old.Version <= s.Version {
		c.tenants[s.TenantID] = s
	}
}

// Invalidate drops a tenant's settings ("" drops all).
func (c *Cache) Invalidate(tenantID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if tenantID == "" {
		c.tenants = map[string]*Settings{}
		for _, ws := range c.watchers {
			for w := range ws {
				poke(w)
			}
		}
		return
	}
	delete(c.tenants, tenantID)
	for w := range c.watchers[tenantID] {
		poke(w)
	}
}

// Watch returns a channel that receives after each change of the tenant's
// catalog (several changes may arrive as one; so may none, when the
// listener reconnects). Call stop when done.
func (c *Cache) Watch(tenantID string) (changed <-chan struct{}, stop func()) {
	w := make(chan struct{}, 1)
	c.mu.Lock()
	if c.watchers[tenantID] == nil {
		c.watchers[tenantID] = map[chan struct{}]struct{}{}
	}
	c.watchers[tenantID][w] = struct{}{}
	c.mu.Unlock()
	return w, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers[tenantID], w)
		if len(c.watchers[tenantID]) == 0 {
			delete(c.watchers, tenantID)
		}
	}
}

func poke(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Run listens for catalog changes until ctx ends. Every change of the
// listener's state drops all settings: changes may have been missed.
func (c *Cache) Run(ctx context.Context) error {
	return store.Listen(ctx, c.pool, store.CatalogChannel, c.logger,
		func(bool) { c.Invalidate("") }, c.Invalidate)
}
