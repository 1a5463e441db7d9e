package store

import (
	"slices"
	"sync"

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
