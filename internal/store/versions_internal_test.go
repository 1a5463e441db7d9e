package store

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

// TestAgentVersionReadOnce: an agent version is read from the database
// once per process — once for all the turns of a cold worker that need
// it at the same moment — and then served from memory; a version that
// does not exist is NotFound for each caller, and not kept.
func TestAgentVersionReadOnce(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, devtest.Database(t), Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{
		TenantID: "demo", DefaultAgent: "assistant",
		Agents: []agent.Agent{{ID: "assistant", Model: "openai:gpt-4o-mini", SystemPrompt: "Be brief.", Limits: agent.Limits{MaxIterations: 4}}},
	}}}, false)
	require.NoError(t, err)

	concurrently := func(version int) ([]agent.Agent, []error) {
		const n = 32
		got, errs := make([]agent.Agent, n), make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				got[i], errs[i] = s.AgentVersion(ctx, "demo", "assistant", version)
			})
		}
		close(start)
		wg.Wait()
		return got, errs
	}

	got, errs := concurrently(1)
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, "Be brief.", got[i].SystemPrompt)
		require.Equal(t, 1, got[i].Version)
	}
	require.Equal(t, int64(1), s.versions.reads.Load(), "32 callers of a cold cache, one read")
	_, err = s.AgentVersion(ctx, "demo", "assistant", 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.versions.reads.Load(), "served from memory")

	_, errs = concurrently(7)
	for _, err := range errs {
		require.Equal(t, agent.CodeNotFound, agent.ErrorCode(err), "error: %v", err)
	}
	reads := s.versions.reads.Load()
	_, err = s.AgentVersion(ctx, "demo", "assistant", 7)
	require.Equal(t, agent.CodeNotFound, agent.ErrorCode(err))
	require.Equal(t, reads+1, s.versions.reads.Load(), "a missing version is not kept")
}
