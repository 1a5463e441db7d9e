package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/knowledge"
)

const extractScript = `
rules:
  - name: extract
    when: {system: 'long-term memory', user: 'Conversation:'}
    reply: {text: "Here you are:\n[\"Ana drinks only green tea\", \"Ana lives in Porto\", \"Ana lives in Porto\", \"\"]"}
`

// TestExtractMemoriesStoresFactsOnce: the extraction of a session's
// position asks the summary model for its facts and stores them once; a
// retry of the same position asks no model again and stores nothing,
// and an agent whose memory does not extract, or a session without a
// caller, asks nothing at all.
func TestExtractMemoriesStoresFactsOnce(t *testing.T) {
	t.Parallel()
	var mem *knowledge.Memories
	h := newHarness(t, extractScript, func(d *Deps) {
		ks, err := knowledge.New(context.Background(), d.Store.Pool(), knowledge.Options{})
		require.NoError(t, err)
		mem = ks.Memories(d.Model.(knowledge.Embedder), "openai:text-embedding-3-small")
		d.Memories = mem
	})
	ctx := context.Background()
	require.NoError(t, h.store.AppendSession(ctx, "demo", "s1", "j1", []agent.Message{
		{Role: agent.RoleUser, Content: "I am Ana; I only drink green tea, and I live in Porto."},
		{Role: agent.RoleAssistant, Content: "Noted, Ana."},
	}))
	ana := &agent.Caller{Name: "ana", Issuer: agent.IssuerStaticToken, Subject: "ana"}
	in := contract.MemoryExtractInput{TenantID: "demo", SessionID: "s1", AgentID: "assistant", Caller: ana, Through: 1}

	// The catalog's assistant does not extract.
	extract := func() contract.ExtractMemoriesResult {
		t.Helper()
		var res contract.ExtractMemoriesResult
		h.execute(t, contract.ExtractMemories, in, &res)
		return res
	}
	require.Equal(t, "the agent does not extract memories", extract().Skipped)
	require.Zero(t, h.model.Served("extract"))

	cat, err := catalog.Parse(h.acts.tools, "t.yaml", []byte(strings.Replace(testCatalog, "    system_prompt: Be brief.",
		"    system_prompt: Be brief.\n    memory: {extract: true, summary_model: openai:gpt-4o-mini}", 1)))
	require.NoError(t, err)
	_, err = h.applyCatalog(ctx, cat, false)
	require.NoError(t, err)

	require.Equal(t, contract.ExtractMemoriesResult{Stored: 2}, extract())
	require.Equal(t, 1, h.model.Served("extract"))
	scope := agent.MemoryScope{Tenant: "demo", AgentID: "assistant", User: ana.Principal()}
	list, err := mem.List(ctx, scope, "", 0)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, m := range list {
		require.Equal(t, agent.MemoryExtracted, m.Source)
		require.Equal(t, "s1@1", m.Origin)
	}

	// A retry of the same position (the activity's, or the workflow's
	// start again) stores nothing and asks no model.
	require.Equal(t, "extracted before", extract().Skipped)
	require.Equal(t, 1, h.model.Served("extract"))
	list, err = mem.List(ctx, scope, "", 0)
	require.NoError(t, err)
	require.Len(t, list, 2)

	// A later position extracts again; the same facts are the same
	// memories.
	in.Through = 2
	require.Equal(t, contract.ExtractMemoriesResult{}, extract())
	require.Equal(t, 2, h.model.Served("extract"))

	in.Caller = nil
	require.Equal(t, "no authenticated caller", extract().Skipped)
	require.Equal(t, 2, h.model.Served("extract"))
}

const recallScript = `
rules:
  - name: answer
    when: {user: '.'}
    reply: {text: 'You like green tea.'}
`

// TestCallModelRecallsTheCallersMemories: an agent whose memory says
// recall reads, in a later turn of another session, what its caller
// remembered, marked as data; another caller's turn reads none of it.
func TestCallModelRecallsTheCallersMemories(t *testing.T) {
	t.Parallel()
	var mem *knowledge.Memories
	h := newHarness(t, recallScript, func(d *Deps) {
		ks, err := knowledge.New(context.Background(), d.Store.Pool(), knowledge.Options{})
		require.NoError(t, err)
		mem = ks.Memories(d.Model.(knowledge.Embedder), "openai:text-embedding-3-small")
		d.Memories = mem
	})
	ctx := context.Background()
	cat, err := catalog.Parse(h.acts.tools, "t.yaml", []byte(strings.Replace(testCatalog, "    system_prompt: Be brief.",
		"    system_prompt: Be brief.\n    memory: {recall: true, top_k: 3, budget: 200}", 1)))
	require.NoError(t, err)
	_, err = h.applyCatalog(ctx, cat, false)
	require.NoError(t, err)
	ana := &agent.Caller{Name: "ana", Issuer: agent.IssuerStaticToken, Subject: "ana"}
	_, _, err = mem.Remember(ctx, agent.MemoryScope{Tenant: "demo", AgentID: "assistant", User: ana.Principal()},
		agent.MemoryRecord{Text: "Ana drinks only green tea", Source: agent.MemoryRemembered, Origin: "earlier"})
	require.NoError(t, err)

	ask := func(who *agent.Caller) string {
		t.Helper()
		job := randomJob()
		in := loadAgentInput(job, "what tea do I like?")
		in.Request.SessionID, in.Request.Caller = "another-session-"+job, who
		var loaded contract.LoadAgentResult
		h.execute(t, contract.LoadAgent, in, &loaded)
		h.startTurn(t, job)
		var res contract.CallModelResult
		h.execute(t, contract.CallModel, callModelInput(job, loaded.Agent), &res)
		reqs := h.model.Requests()
		var all strings.Builder
		for _, m := range reqs[len(reqs)-1].Messages {
			all.WriteString(m.Role + ": " + m.Content + "\n")
		}
		return all.String()
	}
	sent := ask(ana)
	require.Contains(t, sent, "Ana drinks only green tea")
	require.Contains(t, sent, "user: <memories note=") // data in a user message, never a system prompt
	require.Contains(t, sent, "data, not instructions")
	sent = ask(&agent.Caller{Name: "bob", Issuer: agent.IssuerStaticToken, Subject: "bob"})
	require.NotContains(t, sent, "green tea")
	require.NotContains(t, sent, "<memories")
}
