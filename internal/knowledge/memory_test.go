package knowledge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/knowledge"
)

func TestMemoriesRememberRecallScoped(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	mem := e.ks.Memories(e.emb, model)
	alice := agent.MemoryScope{Tenant: "acme", AgentID: "assistant", User: "alice"}

	got, created, err := mem.Remember(ctx, alice, agent.MemoryRecord{Text: "  Alice prefers tea over coffee ", Tags: []string{"Drinks", "drinks"}, Source: agent.MemoryRemembered, Origin: "job-1"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "Alice prefers tea over coffee", got.Text)
	require.Equal(t, []string{"drinks"}, got.Tags)
	require.Equal(t, agent.MemoryID(alice, got.Text), got.ID)
	_, _, err = mem.Remember(ctx, alice, agent.MemoryRecord{Text: "Alice lives in Lisbon", Source: agent.MemoryExtracted, Origin: "s1@4"})
	require.NoError(t, err)

	// The same fact again is the same memory, embedded and stored once.
	calls := e.srv.Embedded()
	again, created, err := mem.Remember(ctx, alice, agent.MemoryRecord{Text: "Alice prefers tea over coffee", Source: agent.MemoryRemembered})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, got.ID, again.ID)
	require.Equal(t, calls, e.srv.Embedded())

	hits, _, err := mem.Recall(ctx, alice, "what does she like to drink, tea?", 5)
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	require.Equal(t, got.ID, hits[0].ID)
	require.Positive(t, hits[0].Score)

	// Nobody else recalls, lists, forgets or erases Alice's memories.
	for name, other := range map[string]agent.MemoryScope{
		"another user":   {Tenant: "acme", AgentID: "assistant", User: "bob"},
		"another agent":  {Tenant: "acme", AgentID: "ops", User: "alice"},
		"another tenant": {Tenant: "globex", AgentID: "assistant", User: "alice"},
	} {
		hits, _, err := mem.Recall(ctx, other, "tea coffee Lisbon", 5)
		require.NoError(t, err, name)
		require.Empty(t, hits, name)
		list, err := mem.List(ctx, other, "", 0)
		require.NoError(t, err, name)
		require.Empty(t, list, name)
		require.True(t, agent.IsCode(mem.Forget(ctx, other, got.ID), agent.CodeNotFound), name)
		n, err := mem.Erase(ctx, other)
		require.NoError(t, err, name)
		require.Zero(t, n, name)
	}
	// Bob's own copy of the same fact is his own memory.
	bob := agent.MemoryScope{Tenant: "acme", AgentID: "assistant", User: "bob"}
	bobs, created, err := mem.Remember(ctx, bob, agent.MemoryRecord{Text: "Alice prefers tea over coffee", Source: agent.MemoryRemembered})
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, got.ID, bobs.ID)

	// The memory collection is no collection of the tenant's.
	cols, err := e.ks.Collections(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, cols)

	list, err := mem.List(ctx, agent.MemoryScope{Tenant: "acme", User: "alice"}, "", 0)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "Alice lives in Lisbon", list[0].Text) // newest first
	page, err := mem.List(ctx, agent.MemoryScope{Tenant: "acme", User: "alice"}, list[0].ID, 0)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, got.ID, page[0].ID)

	require.NoError(t, mem.Forget(ctx, alice, got.ID))
	require.True(t, agent.IsCode(mem.Forget(ctx, alice, got.ID), agent.CodeNotFound))
	list, err = mem.List(ctx, alice, "", 0)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestMemoriesEraseLeavesNothingOfTheUser(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	mem := e.ks.Memories(e.emb, model)
	for _, s := range []agent.MemoryScope{
		{Tenant: "acme", AgentID: "assistant", User: "alice"},
		{Tenant: "acme", AgentID: "ops", User: "alice"},
		{Tenant: "acme", AgentID: "assistant", User: "bob"},
	} {
		for _, text := range []string{"likes sailing", "has a cat named Miso", "works nights"} {
			_, _, err := mem.Remember(ctx, s, agent.MemoryRecord{Text: text, Source: agent.MemoryRemembered})
			require.NoError(t, err)
		}
	}
	n, err := mem.Erase(ctx, agent.MemoryScope{Tenant: "acme", User: "alice"})
	require.NoError(t, err)
	require.Equal(t, 6, n)

	var docs, chunks int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_documents WHERE metadata->>'user' = 'alice'`).Scan(&docs))
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_chunks WHERE metadata->>'user' = 'alice'`).Scan(&chunks))
	require.Zero(t, docs)
	require.Zero(t, chunks)
	require.Equal(t, 3, e.count(t, "knowledge_chunks")) // Bob's are kept

	n, err = mem.Erase(ctx, agent.MemoryScope{Tenant: "acme", User: "alice"})
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestMemoriesBadInput(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	mem := e.ks.Memories(e.emb, model)
	ok := agent.MemoryScope{Tenant: "acme", AgentID: "assistant", User: "alice"}
	for name, c := range map[string]struct {
		scope agent.MemoryScope
		mem   agent.MemoryRecord
		want  string
	}{
		"no user":     {agent.MemoryScope{Tenant: "acme", AgentID: "assistant"}, agent.MemoryRecord{Text: "x", Source: "remember"}, "authenticated caller"},
		"no tenant":   {agent.MemoryScope{AgentID: "assistant", User: "alice"}, agent.MemoryRecord{Text: "x", Source: "remember"}, "tenant_id is required"},
		"bad tenant":  {agent.MemoryScope{Tenant: "acme/memory", AgentID: "assistant", User: "alice"}, agent.MemoryRecord{Text: "x", Source: "remember"}, "may not contain '/'"},
		"no agent":    {agent.MemoryScope{Tenant: "acme", User: "alice"}, agent.MemoryRecord{Text: "x", Source: "remember"}, "agent_id is required"},
		"empty":       {ok, agent.MemoryRecord{Text: "  ", Source: "remember"}, "memory text is empty"},
		"too long":    {ok, agent.MemoryRecord{Text: strings.Repeat("a", agent.MaxMemoryBytes+1), Source: "remember"}, "the limit is 2000"},
		"not utf-8":   {ok, agent.MemoryRecord{Text: "a\xffb", Source: "remember"}, "not valid UTF-8"},
		"bad tag":     {ok, agent.MemoryRecord{Text: "x", Tags: []string{"no spaces"}, Source: "remember"}, "memory tag"},
		"many tags":   {ok, agent.MemoryRecord{Text: "x", Tags: strings.Split("a,b,c,d,e,f,g,h,i", ","), Source: "remember"}, "9 tags"},
		"bad source":  {ok, agent.MemoryRecord{Text: "x", Source: "guess"}, "memory source"},
		"long origin": {ok, agent.MemoryRecord{Text: "x", Source: "remember", Origin: strings.Repeat("o", 600)}, "origin"},
	} {
		_, _, err := mem.Remember(ctx, c.scope, c.mem)
		require.Error(t, err, name)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), name)
		require.Contains(t, err.Error(), c.want, name)
	}
	require.Zero(t, e.count(t, "knowledge_documents"))

	_, _, err := mem.Recall(ctx, ok, "", 5)
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
	_, _, err = mem.Recall(ctx, ok, "tea", knowledge.MaxTopK+1)
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
	require.True(t, agent.IsCode(mem.Forget(ctx, ok, "doc_123"), agent.CodeInvalid))
	_, err = mem.List(ctx, ok, "nope", 0)
	require.True(t, agent.IsCode(err, agent.CodeInvalid))

	// Recall before any memory was stored finds nothing, and is no error.
	hits, _, err := mem.Recall(ctx, ok, "tea", 5)
	require.NoError(t, err)
	require.Empty(t, hits)
}
