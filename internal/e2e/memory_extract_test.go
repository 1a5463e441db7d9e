package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/testserver"
)

// extractScript answers the conversation's turns and, as the extractor,
// lists one fact.
const extractScript = `
rules:
  - name: extract
    when: {system: 'long-term memory of a user'}
    reply: {text: '["The user drinks only green tea."]'}
  - name: chat
    when: {user: '.'}
    reply: {text: 'Noted.'}
`

const extractCatalog = `
tenant: demo
default_agent: keeper
agents:
  - id: keeper
    model: openai:gpt-4o-mini
    system_prompt: Answer briefly.
    memory: {summary_model: openai:gpt-4o, extract: true}
`

// TestMemoryExtractedWhenIdle: a conversation of an authenticated caller
// that goes quiet for its idle time (memory_idle_sec) starts
// MemoryExtract for its turns, which stores the summary model's fact as
// the caller's memory with the agent; both histories replay (recorded as
// conversation_memory_extract and memory_extract).
func TestMemoryExtractedWhenIdle(t *testing.T) {
	e := &env{Server: testserver.Start(t, testserver.Options{Script: extractScript, Catalogs: []string{extractCatalog}}), t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice := &agent.Caller{Name: "alice", Issuer: agent.IssuerStaticToken, Subject: "alice"}
	in := agent.ConversationInput{TenantID: "demo", SessionID: "extract-" + testserver.RandomID(), MemoryIdleSec: 3}
	for _, prompt := range []string{"I drink only green tea.", "What should I order?"} {
		res, err := e.converseMessage(ctx, in, agent.SendMessage{Prompt: prompt, Caller: alice})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%q: %v", prompt, res.Error)
	}

	// The extraction's id names the session and its two turns; it starts
	// once the conversation has been quiet for three seconds (long enough
	// that the second message comes before an extraction of the first
	// turn alone).
	id := contract.MemoryExtractWorkflowID(in.TenantID, in.SessionID, 2)
	var res contract.ExtractMemoriesResult
	require.Eventually(t, func() bool {
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return e.Client().GetWorkflow(wait, id, "").Get(wait, &res) == nil
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, contract.ExtractMemoriesResult{Stored: 1}, res)
	require.Equal(t, 1, e.Model.Served("extract"))

	ks, err := knowledge.New(ctx, e.Store().Pool(), knowledge.Options{})
	require.NoError(t, err)
	mems, err := ks.Memories(nil, "").List(ctx, agent.MemoryScope{Tenant: in.TenantID, AgentID: "keeper", User: alice.Principal()}, "", 10)
	require.NoError(t, err)
	require.Len(t, mems, 1)
	require.Equal(t, "The user drinks only green tea.", mems[0].Text)
	require.Equal(t, agent.MemoryExtracted, mems[0].Source)

	// The conversation's run: two turns, the quiet timer, the child's
	// start, taken in by a workflow task; it waits on for messages.
	conv := contract.ConversationWorkflowID(in.TenantID, in.SessionID)
	require.Eventually(t, func() bool {
		events := e.history(conv)
		started := slices.ContainsFunc(events, func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
		})
		return started && events[len(events)-1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	}, 10*time.Second, 50*time.Millisecond)
	e.replay(conv, "conversation_memory_extract")
	e.replay(id, "memory_extract")
}
