package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

const (
	sqlActiveAgent = `
SELECT v.version, v.spec
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1 AND a.agent_id = $2`

	sqlAgentVersion = `
SELECT version, spec FROM agent_versions
WHERE tenant_id = $1 AND agent_id = $2 AND version = $3`

	sqlListAgents = `
SELECT v.version, v.spec
FROM agents a
JOIN agent_versions v ON v.tenant_id = a.tenant_id AND v.agent_id = a.agent_id AND v.version = a.active_version
WHERE a.tenant_id = $1
ORDER BY a.agent_id`
)

// ActiveAgent returns the active version of an agent; agent.CodeNotFound
// when the tenant has no such agent.
func (s *Store) ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error) {
	if err := requireKey(tenantID, "agent_id", agentID); err != nil {
		return agent.Agent{}, err
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, sqlActiveAgent, tenantID, agentID))
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "agent %q of tenant %q not found", agentID, tenantID), "load agent %q", agentID); err != nil {
		return agent.Agent{}, err
	}
	return a, nil
}

// AgentVersion returns one version of an agent, as pinned by a turn;
// agent.CodeNotFound when it does not exist.
func (s *Store) AgentVersion(ctx context.Context, tenantID, agentID string, version int) (agent.Agent, error) {
	if err := requireKey(tenantID, "agent_id", agentID); err != nil {
		return agent.Agent{}, err
	}
	if version <= 0 {
		return agent.Agent{}, agent.Errorf(agent.CodeInvalid, "agent version must be positive, got %d", version)
	}
	key := versionKey{tenantID, agentID, version}
	if a, ok := s.versions.get(key); ok {
		return a, nil
	}
	a, err := s.versions.load(ctx, key, func(ctx context.Context) (agent.Agent, error) {
		a, err := scanAgent(s.pool.QueryRow(ctx, sqlAgentVersion, tenantID, agentID, version))
		if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "version %d of agent %q of tenant %q not found", version, agentID, tenantID),
			"load agent %q version %d", agentID, version); err != nil {
			return agent.Agent{}, err
		}
		return a, nil
	})
	if err != nil {
		return agent.Agent{}, err
	}
	return clipped(a), nil
}

// DefaultAgent returns the id of the tenant's default agent;
// agent.CodeNotFound when the tenant is unknown or has none.
func (s *Store) DefaultAgent(ctx context.Context, tenantID string) (string, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return "", err
	}
	var id *string
	err := s.pool.QueryRow(ctx, sqlTenantDefault, tenantID).Scan(&id)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "tenant %q not found", tenantID), "load default agent of tenant %q", tenantID); err != nil {
		return "", err
	}
	if id == nil {
		return "", agent.Errorf(agent.CodeNotFound, "tenant %q has no default agent", tenantID)
	}
	return *id, nil
}

// ListAgents returns the active version of each of the tenant's agents,
// sorted by id; none for an unknown tenant.
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]agent.Agent, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	agents, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (agent.Agent, error) { return scanAgent(row) }, sqlListAgents, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list agents of tenant %q: %w", tenantID, err)
	}
	return agents, nil
}

// scanAgent reads (version, spec). The spec was stored with version 0 so
// that its hash compares content only.
func scanAgent(row pgx.Row) (agent.Agent, error) {
	var version int
	var spec []byte
	if err := row.Scan(&version, &spec); err != nil {
		return agent.Agent{}, err
	}
	var a agent.Agent
	if err := json.Unmarshal(spec, &a); err != nil {
		return agent.Agent{}, fmt.Errorf("decode spec: %w", err)
	}
	a.Version = version
	return a, nil
}
