package activities

import (
	"context"
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
)

// Compiled agents (the inference-upgrade seed's compiled artefact).
//
// An agent version as its model receives it (agent.Compiled, llm.Compile)
// is kept as an artefact named by its content hash, in the object store
// when the worker has one (store.PutCompiledAgent). A turn's LoadAgent
// reads it from the store — every turn, so that an artefact deleted is
// noticed by the next turn — and compiles the version again only when it
// is missing, of another format, or not this version's: the compile is a
// function of the version, so the artefact it stores again has the same
// hash. The turn records the artefact it began with (store.Turn and
// LoadAgentResult.Compiled), and its model calls send the artefact's
// tools (modelCall.specs), which this process keeps by agent version
// once read. The artefact store being away never fails a turn: the
// version is compiled in the process, and stored when the store is back.

// maxCompiled bounds the compiled agents a worker keeps; past it the
// cache starts again, which costs one read per version in use.
const maxCompiled = 4096

type compiledKey struct {
	tenantID, agentID string
	version           int
}

// compiledCache keeps the compiled agents this process read or made, by
// agent version: a version compiles to one artefact in a format.
type compiledCache struct {
	mu sync.Mutex
	m  map[compiledKey]compiledEntry
}

type compiledEntry struct {
	ref string
	c   agent.Compiled
}

func (c *compiledCache) get(k compiledKey) (compiledEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e, ok
}

func (c *compiledCache) put(k compiledKey, e compiledEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCompiled {
		c.m = map[compiledKey]compiledEntry{}
	}
	c.m[k] = e
}

// compiledAgent is ag's compiled artefact and its ref. With fresh (a
// turn's start) the store is read whatever this process keeps; otherwise
// (a model call) what it keeps is taken.
func (a *Activities) compiledAgent(ctx context.Context, ag agent.Agent, fresh bool) (agent.Compiled, string) {
	k := compiledKey{ag.TenantID, ag.ID, ag.Version}
	if e, ok := a.compiled.get(k); ok && !fresh {
		return e.c, e.ref
	}
	log := a.log(ctx).With(zap.String("tenant", ag.TenantID), zap.String("agent_id", ag.ID), zap.Int("agent_version", ag.Version))
	stored, err := a.store.CompiledAgent(ctx, ag.TenantID, ag.ID, ag.Version)
	if err == nil {
		var c agent.Compiled
		if json.Unmarshal(stored.Data, &c) == nil && c.Format == agent.CompiledFormat &&
			c.TenantID == ag.TenantID && c.AgentID == ag.ID && c.AgentVersion == ag.Version {
			a.compiled.put(k, compiledEntry{ref: stored.Ref, c: c})
			return c, stored.Ref
		}
		log.Info("compiled agent is of another format; compiling it again", zap.String("ref", stored.Ref), zap.String("format", stored.Format))
	} else if !agent.IsCode(err, agent.CodeNotFound) {
		log.Warn("compiled agent not read; compiling it in the process", zap.Error(err))
	}
	c := llm.Compile(ag, offered(ag))
	for _, t := range c.Tools {
		if !t.Strict {
			log.Debug("tool sent without strict", zap.String("model", c.Model), zap.String("tool", t.Name), zap.String("reason", t.NotStrict))
		}
	}
	data, sum, err := agent.Canonical(c)
	if err != nil {
		log.Warn("compiled agent not encoded", zap.Error(err))
		return c, ""
	}
	ref, err := a.store.PutCompiledAgent(ctx, ag.TenantID, ag.ID, ag.Version, c.Format, data)
	if err != nil {
		// Named all the same: the next turn stores the same bytes.
		log.Warn("compiled agent not stored; the next turn stores it", zap.Error(err))
		return c, agent.CompiledRef(sum)
	}
	log.Debug("agent compiled", zap.String("ref", ref))
	a.compiled.put(k, compiledEntry{ref: ref, c: c})
	return c, ref
}

// specs are the call's tools as its model is sent them: the compiled
// agent's (each by name; a tool it lacks, such as the turn's recall
// tool, compiled for the call), when the call's model takes them — its
// strict dialect is theirs —; nil otherwise (a fallback model of another
// provider), and the model call compiles the tools for its model.
func (m *modelCall) specs(tools []agent.Tool) []agent.CompiledTool {
	c := m.compiled
	if c == nil || c.Dialect != llm.StrictDialect(m.ag.Model) {
		return nil
	}
	out := make([]agent.CompiledTool, 0, len(tools))
	for _, t := range tools {
		if ct, ok := c.Tool(t.Name); ok {
			out = append(out, ct)
			continue
		}
		out = append(out, llm.CompileTools(m.ag.Model, []agent.Tool{t})...)
	}
	return out
}
