package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/agentflow/agentflow/internal/agent"
)

// maxVersions bounds the agent versions a Store keeps: past it, the
// cache starts again, which costs one read per version in use.
const maxVersions = 4096

type versionKey struct {
	tenantID, agentID string
	version           int
}

// versionCache holds agent versions by tenant, agent and version. No
// version is ever changed or deleted once stored (a change makes a new
// one), so an entry is never stale.
type versionCache struct {
	mu sync.Mutex
	m  map[versionKey]agent.Agent
	// flights shares a version's read among the callers that miss it at
	// once (the turns of a cold worker); reads counts the reads made.
	flights singleflight.Group
	reads   atomic.Int64
}

// versionReadTimeout bounds a shared read: it outlives the caller that
// began it, whose leaving must not fail the others.
const versionReadTimeout = 30 * time.Second

// load reads version k with read, once for all the callers waiting for
// it, and keeps it.
func (c *versionCache) load(ctx context.Context, k versionKey, read func(context.Context) (agent.Agent, error)) (agent.Agent, error) {
	ch := c.flights.DoChan(fmt.Sprintf("%s\x00%s\x00%d", k.tenantID, k.agentID, k.version), func() (any, error) {
		if a, ok := c.get(k); ok {
			return a, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), versionReadTimeout)
		defer cancel()
		c.reads.Add(1)
		a, err := read(rctx)
		if err != nil {
			return nil, err
		}
		c.put(k, a)
		return a, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return agent.Agent{}, r.Err
		}
		return r.Val.(agent.Agent), nil
	case <-ctx.Done():
		return agent.Agent{}, ctx.Err()
	}
}

func (c *versionCache) get(k versionKey) (agent.Agent, bool) {
	c.mu.Lock()
	a, ok := c.m[k]
	c.mu.Unlock()
	return clipped(a), ok
}

func (c *versionCache) put(k versionKey, a agent.Agent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxVersions {
		c.m = map[versionKey]agent.Agent{}
	}
	c.m[k] = a
}

// clipped is a with its slices clipped to their length, so that a caller
// that appends to one gets a copy of its own instead of writing into the
// array the cache shares. Callers do not write into the elements.
func clipped(a agent.Agent) agent.Agent {
	a.FallbackModels = slices.Clip(a.FallbackModels)
	a.FallbackOn = slices.Clip(a.FallbackOn)
	a.ModelsAllowed = slices.Clip(a.ModelsAllowed)
	a.Examples = slices.Clip(a.Examples)
	a.Tools = slices.Clip(a.Tools)
	return a
}
