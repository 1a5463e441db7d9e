package knowledge_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
)

// BenchmarkMemoryRecall: one user's recall in a tenant whose memory holds
// 100 users' memories of 100 facts each (10,000 in all), through the
// exact path: the scope's filter keeps the scan to the user's own.
func BenchmarkMemoryRecall(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, devtest.Database(b), store.Options{})
	require.NoError(b, err)
	b.Cleanup(st.Close)
	ks, err := knowledge.New(ctx, st.Pool(), knowledge.Options{})
	require.NoError(b, err)
	srv, err := scripted.Start("127.0.0.1:0", scripted.Demo(), scripted.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close() })
	emb, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL()})
	require.NoError(b, err)
	mem := ks.Memories(emb, model)
	for u := range 100 {
		scope := agent.MemoryScope{Tenant: "acme", AgentID: "assistant", User: fmt.Sprintf("user-%d", u)}
		recs := make([]agent.MemoryRecord, 100)
		for i := range recs {
			recs[i] = agent.MemoryRecord{Text: fmt.Sprintf("fact %d of user %d: likes topic-%d and place-%d", i, u, i*7%53, i*11%29), Source: agent.MemoryRemembered}
		}
		_, _, err := mem.RememberAll(ctx, scope, recs)
		require.NoError(b, err)
	}
	scope := agent.MemoryScope{Tenant: "acme", AgentID: "assistant", User: "user-42"}
	b.ResetTimer()
	for b.Loop() {
		hits, _, err := mem.Recall(ctx, scope, "which places does the user like? place-7", 5)
		if err != nil || len(hits) == 0 {
			b.Fatalf("recall: %v, %d hits", err, len(hits))
		}
	}
}
