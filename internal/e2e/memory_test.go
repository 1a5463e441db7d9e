package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// memoryScript answers notes, remembers a name in the summary it is asked
// to write, and knows the name only from a summary.
const memoryScript = `
rules:
  - name: summarize
    when: {system: 'memory of a conversation', user: '(?s)(?:name is|called) (?P<name>[A-Z][a-z]+)'}
    reply: {text: 'The user is called ${name}.'}
  - name: summarize-nothing
    when: {system: 'memory of a conversation'}
    reply: {text: 'The user wrote notes.'}
  - name: recall
    when: {system: 'called (?P<name>[A-Z][a-z]+)', user: 'what is my name'}
    reply: {text: 'Your name is ${name}.'}
  - name: forgot
    when: {user: 'what is my name'}
    reply: {text: 'I do not know your name.'}
  - name: greet
    when: {user: '^My name is (\w+)'}
    reply: {text: 'Nice to meet you, $1.'}
  - name: note
    when: {user: '^note (\d+)'}
    reply: {text: 'Noted $1.'}
`

const memoryCatalog = `
tenant: demo
default_agent: keeper
agents:
  - id: keeper
    model: openai:gpt-4o-mini
    system_prompt: Answer briefly.
    memory: {window_tokens: 200, summary_model: openai:gpt-4o}
`

// TestConversationMemory: a 300-message conversation reads a bounded
// window of its transcript after a rolling summary of the rest, which a
// model call of its own writes between turns and the usage ledger counts;
// a fact from the first message is still known at the last, and the
// transcript shows the summary.
func TestConversationMemory(t *testing.T) {
	e := &env{Server: testserver.Start(t, testserver.Options{Script: memoryScript, Catalogs: []string{memoryCatalog}}), t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in := agent.ConversationInput{TenantID: "demo", SessionID: "memory-" + testserver.RandomID(), MaxHistoryEvents: 300}
	send := func(prompt string) agent.TurnResult {
		t.Helper()
		res, err := e.converse(ctx, in, prompt)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%q: %v", prompt, res.Error)
		return res
	}
	require.Equal(t, "Nice to meet you, Ada.", send("My name is Ada.").Output)
	for i := 2; i < 300; i++ {
		send(fmt.Sprintf("note %d", i))
	}
	require.Equal(t, "Your name is Ada.", send("what is my name?").Output, "the first message, remembered at the 300th")

	require.Equal(t, 298, e.Model.Served("note"))
	require.Equal(t, 1, e.Model.Served("recall"))
	require.Zero(t, e.Model.Served("forgot"))

	// Every turn's model (of those the model server kept, the latest) read
	// at most the window of the transcript, after the summary and before
	// its own prompt.
	turns := 0
	for _, r := range e.Model.Requests() {
		if r.Model != "gpt-4o-mini" {
			continue
		}
		turns++
		history := 0
		for _, m := range r.Messages[:len(r.Messages)-1] {
			if m.Role != "system" {
				history += agent.EstimateTokens(m.Content)
			}
		}
		require.LessOrEqual(t, history, 200, "turn %d read %d tokens of transcript", turns, history)
	}
	require.Greater(t, turns, 100)

	// The summaries were model calls of their own, on the summary model,
	// counted in the usage ledger.
	var summaries int
	require.NoError(t, e.Store().Pool().QueryRow(ctx,
		`SELECT count(*) FROM usage_ledger WHERE tenant_id = 'demo' AND session_id = $1 AND job_id LIKE 'summary:%' AND model = 'openai:gpt-4o'`,
		in.SessionID).Scan(&summaries))
	require.Greater(t, summaries, 10)
	mem, err := e.Store().SessionMemory(ctx, "demo", in.SessionID, 1)
	require.NoError(t, err)
	require.Equal(t, "The user is called Ada.", mem.Summary)
	require.Greater(t, mem.SummarySeq, int64(500), "most of the 600 messages are in the summary")

	runs := testserver.Runs(ctx, t, e.Client(), contract.ConversationWorkflowID(in.TenantID, in.SessionID))
	require.Greater(t, len(runs), 1, "the conversation continued as new")
	for _, run := range runs {
		require.LessOrEqual(t, len(run), 300)
	}
	// The first run: its history holds the first summaries' activities.
	e.replayEvents(runs[0], "conversation_memory")
	tr, err := turnclient.Transcript(ctx, e.Client(), contract.ConversationWorkflowID(in.TenantID, in.SessionID))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tr.Window[len(tr.Window)-1].Output, "Your name is"))
}
